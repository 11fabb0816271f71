// Package cpulist reads the kernel's CPU list format ("0-3,8,10-11"), as
// /sys/devices/system/cpu/online, a NUMA node's cpulist and an IRQ's
// affinity lists print it.
package cpulist

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// MaxCPUs bounds the CPU numbers a list may name: far above Linux's
// largest CONFIG_NR_CPUS (8192), and small enough to expand.
const MaxCPUs = 1 << 16

// Parse parses the kernel's cpulist format ("0-3,8,10-11"), as in
// /sys/devices/system/cpu/online, into sorted, distinct CPU numbers.
func Parse(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return nil, errors.New("empty CPU list")
	}
	seen := map[int]bool{}
	var out []int
	for _, part := range strings.Split(s, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("CPU list %q: bad CPU %q", s, lo)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("CPU list %q: bad range %q", s, part)
			}
		}
		// The bound is on the CPU number, not on each range's length: a
		// list of ranges that each pass could otherwise join into one that
		// does not (FuzzParseCPUList regression input 7000-70000,0-10000).
		if b >= MaxCPUs {
			return nil, fmt.Errorf("CPU list %q: CPU %d beyond the %d Linux can number", s, b, MaxCPUs)
		}
		// Counting by offset: "c <= b; c++" never ends when b is the
		// largest int, as c wraps to the smallest (FuzzParseCPUList
		// regression input max-int).
		for n := 0; n <= b-a; n++ {
			if c := a + n; !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// Format prints sorted, distinct CPUs in the kernel's cpulist
// format, ranges merged (Parse's inverse).
func Format(cpus []int) string {
	var parts []string
	for i := 0; i < len(cpus); {
		j := i
		for j+1 < len(cpus) && cpus[j+1] == cpus[j]+1 {
			j++
		}
		part := strconv.Itoa(cpus[i])
		if j > i {
			part += "-" + strconv.Itoa(cpus[j])
		}
		parts = append(parts, part)
		i = j + 1
	}
	return strings.Join(parts, ",")
}

// Read reads a CPU list file; an empty one (a NUMA node with memory and no
// CPUs) lists none.
func Read(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if strings.TrimSpace(string(b)) == "" {
		return nil, nil
	}
	return Parse(string(b))
}

// Online lists the online CPUs, devices/system/cpu/online under the sysfs
// mount sysRoot.
func Online(sysRoot string) ([]int, error) {
	return Read(filepath.Join(sysRoot, "devices", "system", "cpu", "online"))
}
