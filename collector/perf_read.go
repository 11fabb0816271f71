package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// perfReadFormat is what every group leader is opened with: one read(2)
// returns every member's count together with the group's enabled and
// running times, so ratios inside a group come from the same instants.
const perfReadFormat = unix.PERF_FORMAT_GROUP | unix.PERF_FORMAT_TOTAL_TIME_ENABLED |
	unix.PERF_FORMAT_TOTAL_TIME_RUNNING | unix.PERF_FORMAT_ID

// perfGroupRead is one decoded read of a group leader.
type perfGroupRead struct {
	Enabled, Running uint64 // nanoseconds
	Values           []perfValue
}

type perfValue struct {
	Value, ID uint64
}

// perfReadSize is the buffer a read of a group of n events needs under format.
func perfReadSize(format uint64, n int) int {
	words := 1 // nr
	if format&unix.PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
		words++
	}
	if format&unix.PERF_FORMAT_TOTAL_TIME_RUNNING != 0 {
		words++
	}
	per := 1
	if format&unix.PERF_FORMAT_ID != 0 {
		per++
	}
	if format&unix.PERF_FORMAT_LOST != 0 {
		per++
	}
	return 8 * (words + per*n)
}

// decodePerfGroupRead decodes the read_format layout documented in
// perf_event_open(2) for PERF_FORMAT_GROUP, in host byte order:
//
//	struct read_format {
//	    u64 nr;
//	    u64 time_enabled;  // if PERF_FORMAT_TOTAL_TIME_ENABLED
//	    u64 time_running;  // if PERF_FORMAT_TOTAL_TIME_RUNNING
//	    struct {
//	        u64 value;
//	        u64 id;        // if PERF_FORMAT_ID
//	        u64 lost;      // if PERF_FORMAT_LOST
//	    } values[nr];
//	};
//
// Fields the format omits are left zero; lost is read past and dropped.
func decodePerfGroupRead(buf []byte, format uint64) (perfGroupRead, error) {
	var r perfGroupRead
	if format&unix.PERF_FORMAT_GROUP == 0 {
		return r, errors.New("perf read: format lacks PERF_FORMAT_GROUP")
	}
	if len(buf)%8 != 0 {
		return r, fmt.Errorf("perf read: %d bytes is not a whole number of u64 words", len(buf))
	}
	word := func(i int) uint64 { return binary.NativeEndian.Uint64(buf[8*i:]) }
	words := len(buf) / 8
	if words < 1 {
		return r, errors.New("perf read: empty buffer")
	}
	nr := word(0)
	if nr == 0 || nr > 64 {
		return r, fmt.Errorf("perf read: group of %d events (want 1..64)", nr)
	}
	if need := perfReadSize(format, int(nr)); len(buf) != need {
		return r, fmt.Errorf("perf read: %d bytes for a group of %d events, want %d", len(buf), nr, need)
	}
	i := 1
	if format&unix.PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
		r.Enabled = word(i)
		i++
	}
	if format&unix.PERF_FORMAT_TOTAL_TIME_RUNNING != 0 {
		r.Running = word(i)
		i++
	}
	if r.Running > r.Enabled && format&unix.PERF_FORMAT_TOTAL_TIME_ENABLED != 0 {
		return r, fmt.Errorf("perf read: time running %d ns exceeds time enabled %d ns", r.Running, r.Enabled)
	}
	r.Values = make([]perfValue, nr)
	for k := range r.Values {
		r.Values[k].Value = word(i)
		i++
		if format&unix.PERF_FORMAT_ID != 0 {
			r.Values[k].ID = word(i)
			i++
		}
		if format&unix.PERF_FORMAT_LOST != 0 {
			i++
		}
	}
	return r, nil
}

// perfScaler turns successive group reads into multiplexing-corrected
// counts that never decrease. A group the kernel had to time-share with
// others counted only while running; each read adds the new raw counts times
// enabled/running over the interval since the previous read, so the estimate
// follows the current multiplexing ratio and a Prometheus counter built from
// it never goes backwards (scaling the cumulative totals would, whenever the
// ratio changes).
type perfScaler struct {
	last   perfGroupRead
	scaled []float64
}

// add folds one read into the estimates and returns them, one per value.
func (s *perfScaler) add(r perfGroupRead) ([]float64, error) {
	if s.scaled == nil {
		s.scaled = make([]float64, len(r.Values))
		s.last = perfGroupRead{Values: make([]perfValue, len(r.Values))}
	}
	if len(r.Values) != len(s.scaled) {
		return nil, fmt.Errorf("perf read: group changed from %d to %d events", len(s.scaled), len(r.Values))
	}
	if r.Enabled < s.last.Enabled || r.Running < s.last.Running {
		return nil, errors.New("perf read: group times went backwards")
	}
	dEnabled, dRunning := r.Enabled-s.last.Enabled, r.Running-s.last.Running
	for i, v := range r.Values {
		if v.Value < s.last.Values[i].Value {
			return nil, fmt.Errorf("perf read: event %d count went backwards", v.ID)
		}
		d := float64(v.Value - s.last.Values[i].Value)
		if dRunning > 0 && dEnabled > dRunning {
			d *= float64(dEnabled) / float64(dRunning)
		}
		s.scaled[i] += d
	}
	s.last.Enabled, s.last.Running = r.Enabled, r.Running
	copy(s.last.Values, r.Values)
	return s.scaled, nil
}

// maxCPUs bounds the CPU numbers a list may name: far above Linux's
// largest CONFIG_NR_CPUS (8192), and small enough to expand.
const maxCPUs = 1 << 16

// parseCPUList parses the kernel's cpulist format ("0-3,8,10-11"), as in
// /sys/devices/system/cpu/online, into sorted, distinct CPU numbers.
func parseCPUList(s string) ([]int, error) {
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
		if b >= maxCPUs {
			return nil, fmt.Errorf("CPU list %q: CPU %d beyond the %d Linux can number", s, b, maxCPUs)
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

// formatCPUList prints sorted, distinct CPUs in the kernel's cpulist
// format, ranges merged (parseCPUList's inverse).
func formatCPUList(cpus []int) string {
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
