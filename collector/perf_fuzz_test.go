package collector

import (
	"encoding/hex"
	"math"
	"os"
	"reflect"
	"slices"
	"testing"

	"golang.org/x/sys/unix"
)

// encodePerfRead lays r out as read(2) returns it under format, with the
// lost counts zero; the inverse of decodePerfGroupRead.
func encodePerfRead(r perfGroupRead, format uint64) []byte {
	w := []uint64{uint64(len(r.Values))}
	if format&unix.PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
		w = append(w, r.Enabled)
	}
	if format&unix.PERF_FORMAT_TOTAL_TIME_RUNNING != 0 {
		w = append(w, r.Running)
	}
	for _, v := range r.Values {
		w = append(w, v.Value)
		if format&unix.PERF_FORMAT_ID != 0 {
			w = append(w, v.ID)
		}
		if format&unix.PERF_FORMAT_LOST != 0 {
			w = append(w, 0)
		}
	}
	return words(w...)
}

// FuzzPerfGroupRead decodes two successive reads of a group leader under a
// fuzzed read_format and folds them into the multiplexing scaler. A decoded
// read re-encodes to the same read, has the size perfReadSize says, and
// never runs longer than it was enabled; the scaled counts are finite,
// non-negative and do not decrease from one read to the next.
func FuzzPerfGroupRead(f *testing.F) {
	full := uint64(perfReadFormat)
	captured, err := hex.DecodeString(capturedSoftwareRead)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(captured, captured, full)
	f.Add(words(2, 1_000_000_000, 500_000_000, 2_000_000_000, 7, 3_100_000_000, 8),
		words(2, 2_000_000_000, 600_000_000, 2_500_000_000, 7, 3_200_000_000, 8), full)
	f.Add(words(1, 10, 10, 1, 1, 0), words(1, 20, 15, 5, 1, 3), full|unix.PERF_FORMAT_LOST)
	f.Add(words(2, 42, 43), words(2, 50, 60), uint64(unix.PERF_FORMAT_GROUP))
	f.Fuzz(func(t *testing.T, first, second []byte, format uint64) {
		var s perfScaler
		var prev []float64
		for _, buf := range [][]byte{first, second} {
			r, err := decodePerfGroupRead(buf, format)
			if err != nil {
				return
			}
			if n := len(r.Values); n < 1 || n > 64 || perfReadSize(format, n) != len(buf) {
				t.Fatalf("decoded %d values from %d bytes; perfReadSize says %d", n, len(buf), perfReadSize(format, n))
			}
			if format&unix.PERF_FORMAT_TOTAL_TIME_ENABLED != 0 && r.Running > r.Enabled {
				t.Fatalf("running %d > enabled %d", r.Running, r.Enabled)
			}
			again, err := decodePerfGroupRead(encodePerfRead(r, format), format)
			if err != nil || !reflect.DeepEqual(again, r) {
				t.Fatalf("%+v re-encoded decodes to %+v, %v", r, again, err)
			}
			scaled, err := s.add(r)
			if err != nil {
				return
			}
			for i, v := range scaled {
				if !(v >= 0) || math.IsInf(v, 0) {
					t.Fatalf("scaled count %d = %v", i, v)
				}
				if prev != nil && v < prev[i] {
					t.Fatalf("scaled count %d went from %v to %v", i, prev[i], v)
				}
			}
			prev = slices.Clone(scaled)
		}
	})
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
		cpus, err := parseCPUList(s)
		if err != nil {
			return
		}
		if len(cpus) == 0 {
			t.Fatalf("parseCPUList(%q): no CPUs and no error", s)
		}
		for i, c := range cpus {
			if c < 0 || (i > 0 && c <= cpus[i-1]) {
				t.Fatalf("parseCPUList(%q) = %v: not sorted, distinct and non-negative", s, cpus)
			}
		}
		printed := formatCPUList(cpus)
		again, err := parseCPUList(printed)
		if err != nil || !slices.Equal(again, cpus) {
			t.Fatalf("parseCPUList(%q) = %v; printed as %q it parses to %v, %v", s, cpus, printed, again, err)
		}
	})
}
