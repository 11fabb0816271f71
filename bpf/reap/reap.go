// Package reap decides which keys of a BPF map to delete.
//
// The BPF maps of the xdp, napi and drop collectors are keyed by devices,
// programs and maps, which come and go: load balancers reload their XDP
// programs, pods bring veths and namespaces. Each read deletes the keys
// whose object is gone, so dead series are not exported forever and the
// maps keep room for new keys.
//
// A device of the exporter's namespace is gone when the scrape's link dump
// lacks it; the key must also have been read by the previous sweep, which
// ran before that dump was taken, so a device created after the dump is
// never taken for a dead one. A program or map is gone when its id no
// longer opens. A device of another namespace cannot be looked up from
// here: its key is deleted once its counters have not moved for
// DefaultIdle, and counts from zero if it comes back.
package reap

import (
	"errors"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// DefaultIdle is how long a key the exporter cannot check stays without
// counting before it is deleted.
const DefaultIdle = 10 * time.Minute

// Fate is what a key's objects are now.
type Fate int

const (
	Live    Fate = iota
	Gone         // a device, program or map of the key no longer exists
	Unknown      // the exporter cannot tell (a device of another namespace)
)

// Worst combines the fates of a key's objects.
func Worst(fs ...Fate) Fate {
	out := Live
	for _, f := range fs {
		switch {
		case f == Gone:
			return Gone
		case f == Unknown:
			out = Unknown
		}
	}
	return out
}

// Device is a device as the BPF programs record it: its ifindex and the
// inode of its network namespace, so equal ifindexes of two namespaces
// stay apart.
type Device struct{ Ifindex, Netns uint32 }

// Reaper decides which keys of one map to delete.
type Reaper[K comparable] struct {
	idle time.Duration
	// Now is the clock; tests move it.
	Now func() time.Time

	mu   sync.Mutex
	prev map[K]reapState
}

// reapState is a key as the last sweep saw it: its activity (a sum of
// counters, which only grow) and since when that has not changed.
type reapState struct {
	activity uint64
	since    time.Time
}

// New returns a reaper that deletes an Unknown key once it has been idle
// for idle (DefaultIdle when 0).
func New[K comparable](idle time.Duration) *Reaper[K] {
	if idle == 0 {
		idle = DefaultIdle
	}
	return &Reaper[K]{idle: idle, Now: time.Now, prev: map[K]reapState{}}
}

// Sweep takes every key read now with its activity and returns whether
// each is to be deleted: a key the previous sweep saw whose fate is now
// Gone, or an Unknown one idle for the reaper's idle time.
func (r *Reaper[K]) Sweep(keys []K, activity []uint64, fateOf func(K) Fate) []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.Now()
	next := make(map[K]reapState, len(keys))
	stale := make([]bool, len(keys))
	for i, k := range keys {
		st := reapState{activity: activity[i], since: now}
		p, seen := r.prev[k]
		if seen && p.activity == st.activity {
			st.since = p.since
		}
		switch fateOf(k) {
		case Gone:
			stale[i] = seen
		case Unknown:
			stale[i] = now.Sub(st.since) >= r.idle
		}
		if !stale[i] {
			next[k] = st
		}
	}
	r.prev = next
	return stale
}

// Liveness answers whether program and map ids still exist, each asked of
// the kernel once: make one per read.
type Liveness struct {
	progs, maps map[uint32]Fate
}

// NewLiveness returns a Liveness that has asked nothing yet.
func NewLiveness() *Liveness {
	return &Liveness{progs: map[uint32]Fate{}, maps: map[uint32]Fate{}}
}

// Prog is the fate of a BPF program id.
func (l *Liveness) Prog(id uint32) Fate {
	return l.ask(l.progs, id, func() (interface{ Close() error }, error) {
		return ebpf.NewProgramFromID(ebpf.ProgramID(id))
	})
}

// Map is the fate of a BPF map id.
func (l *Liveness) Map(id uint32) Fate {
	return l.ask(l.maps, id, func() (interface{ Close() error }, error) {
		return ebpf.NewMapFromID(ebpf.MapID(id))
	})
}

// ask opens the object by id: gone when the kernel has no such id, unknown
// when it refuses to say (no CAP_SYS_ADMIN).
func (l *Liveness) ask(cache map[uint32]Fate, id uint32, open func() (interface{ Close() error }, error)) Fate {
	if f, ok := cache[id]; ok {
		return f
	}
	obj, err := open()
	f := Live
	switch {
	case err == nil:
		obj.Close()
	case errors.Is(err, os.ErrNotExist):
		f = Gone
	default:
		f = Unknown
	}
	cache[id] = f
	return f
}
