// Package perfevent opens and reads groups of perf events
// (perf_event_open(2)) counting on one CPU, and turns successive reads into
// counts corrected for multiplexing.
package perfevent

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ReadFormat is what every group leader is opened with: one read(2)
// returns every member's count together with the group's enabled and
// running times, so ratios inside a group come from the same instants.
const ReadFormat = unix.PERF_FORMAT_GROUP | unix.PERF_FORMAT_TOTAL_TIME_ENABLED |
	unix.PERF_FORMAT_TOTAL_TIME_RUNNING | unix.PERF_FORMAT_ID

// GroupRead is one decoded read of a group leader.
type GroupRead struct {
	Enabled, Running uint64 // nanoseconds
	Values           []Value
}

// Value is one event's count and the id PERF_EVENT_IOC_ID gave it.
type Value struct {
	Value, ID uint64
}

// ReadSize is the buffer a read of a group of n events needs under format.
func ReadSize(format uint64, n int) int {
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

// DecodeGroupRead decodes the read_format layout documented in
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
func DecodeGroupRead(buf []byte, format uint64) (GroupRead, error) {
	var r GroupRead
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
	if need := ReadSize(format, int(nr)); len(buf) != need {
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
	r.Values = make([]Value, nr)
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

// Scaler turns successive group reads into multiplexing-corrected
// counts that never decrease. A group the kernel had to time-share with
// others counted only while running; each read adds the new raw counts times
// enabled/running over the interval since the previous read, so the estimate
// follows the current multiplexing ratio and a Prometheus counter built from
// it never goes backwards (scaling the cumulative totals would, whenever the
// ratio changes).
type Scaler struct {
	last   GroupRead
	scaled []float64
}

// Add folds one read into the estimates and returns them, one per value.
func (s *Scaler) Add(r GroupRead) ([]float64, error) {
	if s.scaled == nil {
		s.scaled = make([]float64, len(r.Values))
		s.last = GroupRead{Values: make([]Value, len(r.Values))}
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

// Event is one perf event: perf_event_attr's type, config and config1
// (an uncore box's filter register), and perf(1)'s name for it.
type Event struct {
	Name    string
	Type    uint32
	Config  uint64
	Config1 uint64
}

// HWCache is the config of a PERF_TYPE_HW_CACHE event.
func HWCache(cache, op, result uint64) uint64 { return cache | op<<8 | result<<16 }

// Group is one event group open on one CPU: the events are scheduled on
// the PMU together, and one read returns them all with the group's
// enabled and running times.
type Group struct {
	name string
	cpu  int
	fds  []int    // leader first
	ids  []uint64 // kernel event ids, in event order
	buf  []byte
}

// Open opens events as one group counting on cpu (every task), the first
// the leader, and enables it once every member is attached, so that all
// start together.
func Open(name string, events []Event, cpu int) (_ *Group, err error) {
	g := &Group{name: name, cpu: cpu, buf: make([]byte, ReadSize(ReadFormat, len(events)))}
	defer func() {
		if err != nil {
			g.Close()
		}
	}()
	for i, e := range events {
		attr := unix.PerfEventAttr{
			Type:        e.Type,
			Config:      e.Config,
			Ext1:        e.Config1,
			Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
			Read_format: ReadFormat,
		}
		leader := -1
		if i == 0 {
			attr.Bits = unix.PerfBitDisabled
		} else {
			leader = g.fds[0]
		}
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, leader, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			return nil, OpenError(e.Name, cpu, err)
		}
		g.fds = append(g.fds, fd)
		id, err := unix.IoctlGetUint64(fd, unix.PERF_EVENT_IOC_ID)
		if err != nil {
			return nil, fmt.Errorf("perf %s on CPU %d: PERF_EVENT_IOC_ID: %w", e.Name, cpu, err)
		}
		g.ids = append(g.ids, id)
	}
	if err := unix.IoctlSetInt(g.fds[0], unix.PERF_EVENT_IOC_ENABLE, unix.PERF_IOC_FLAG_GROUP); err != nil {
		return nil, fmt.Errorf("perf group %s on CPU %d: enable: %w", name, cpu, err)
	}
	return g, nil
}

// FDs is the number of event file descriptors the group holds.
func (g *Group) FDs() int { return len(g.fds) }

// OpenError says what a perf_event_open errno means.
func OpenError(event string, cpu int, err error) error {
	var why string
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		why = "permission denied: CPU-wide perf events need CAP_PERFMON (Linux 5.8+) or CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= 0"
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		why = "event not supported by this CPU/kernel (no hardware PMU?)"
	case errors.Is(err, unix.ENODEV):
		why = "CPU offline or does not exist"
	default:
		why = "perf_event_open failed"
	}
	return fmt.Errorf("perf %s on CPU %d: %s: %w", event, cpu, why, err)
}

// IsUnsupported reports an error of an event this CPU or kernel does not
// have (no hardware PMU, as in most VMs).
func IsUnsupported(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)
}

// Close closes the group's event fds; it is safe to call twice.
func (g *Group) Close() error {
	var errs []error
	for _, fd := range g.fds {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, err)
		}
	}
	g.fds = nil
	return errors.Join(errs...)
}

// Read reads and decodes the group, its values in the order of the events
// Open was given (matched by id).
func (g *Group) Read() (GroupRead, error) {
	n, err := unix.Read(g.fds[0], g.buf)
	if err != nil {
		return GroupRead{}, fmt.Errorf("perf group %s on CPU %d: read: %w", g.name, g.cpu, err)
	}
	r, err := DecodeGroupRead(g.buf[:n], ReadFormat)
	if err != nil {
		return r, fmt.Errorf("perf group %s on CPU %d: %w", g.name, g.cpu, err)
	}
	if len(r.Values) != len(g.ids) {
		return r, fmt.Errorf("perf group %s on CPU %d: %d values, opened %d events", g.name, g.cpu, len(r.Values), len(g.ids))
	}
	ordered := make([]Value, len(g.ids))
	for _, v := range r.Values {
		k := slices.Index(g.ids, v.ID)
		if k < 0 {
			return r, fmt.Errorf("perf group %s on CPU %d: unknown event id %d", g.name, g.cpu, v.ID)
		}
		ordered[k] = v
	}
	r.Values = ordered
	return r, nil
}

// ReadScaled reads the group and folds the read into s: the counts
// corrected for multiplexing, with the read for its enabled and running
// times.
func (g *Group) ReadScaled(s *Scaler) (GroupRead, []float64, error) {
	r, err := g.Read()
	if err != nil {
		return r, nil, err
	}
	scaled, err := s.Add(r)
	if err != nil {
		return r, nil, fmt.Errorf("perf group %s on CPU %d: %w", g.name, g.cpu, err)
	}
	return r, scaled, nil
}

// OpenOnCPUs opens the group on each CPU, or on none: a group missing on
// some CPUs would make per-CPU comparisons misleading.
func OpenOnCPUs(name string, events []Event, cpus []int) ([]*Group, error) {
	var out []*Group
	for _, cpu := range cpus {
		g, err := Open(name, events, cpu)
		if err != nil {
			for _, o := range out {
				o.Close()
			}
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}
