package cpulist

import (
	"os"
	"reflect"
	"slices"
	"testing"
)

func TestParse(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]int{
		"0-3,8":   {0, 1, 2, 3, 8},
		"0-1\n":   {0, 1},
		"5,1,0-1": {0, 1, 5},
		"7":       {7},
	} {
		got, err := Parse(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("Parse(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "3-1", "0-", "-1", "1,,2", "0-99999999"} {
		if got, err := Parse(in); err == nil {
			t.Errorf("Parse(%q) = %v, want an error", in, got)
		}
	}
}

// FuzzParseCPUList parses cpulist strings (/sys/devices/system/cpu/online):
// a list that parses is non-empty, sorted, distinct and non-negative, and
// printed back in the kernel's format it parses to the same CPUs.
func FuzzParseCPUList(f *testing.F) {
	if b, err := os.ReadFile("/sys/devices/system/cpu/online"); err == nil {
		f.Add(string(b))
	}
	for _, s := range []string{"0-1\n", "0", "0-3,8,10-11", "0-63", "1,0,0-2", "3-2", " 0-1 ", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		cpus, err := Parse(s)
		if err != nil {
			return
		}
		if len(cpus) == 0 {
			t.Fatalf("Parse(%q): no CPUs and no error", s)
		}
		for i, c := range cpus {
			if c < 0 || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("Parse(%q) = %v: not sorted, distinct and non-negative", s, cpus)
			}
		}
		printed := Format(cpus)
		again, err := Parse(printed)
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("Parse(%q) = %v; printed as %q it parses to %v, %v", s, cpus, printed, again, err)
		}
	})
}
