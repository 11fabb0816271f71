package collector

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/cilium/ebpf"
)

// The BPF maps of the xdp and napi collectors are keyed by devices,
// programs and maps, which come and go: load balancers reload their XDP
// programs, pods bring veths and namespaces. Each Update deletes the keys
// whose object is gone, so dead series are not exported forever and the
// maps keep room for new keys.
//
// A device of the exporter's namespace is gone when the scrape's link dump
// lacks it; the key must also have been read by the previous Update, which
// ran before that dump was taken, so a device created after the dump is
// never taken for a dead one. A program or map is gone when its id no
// longer opens. A device of another namespace cannot be looked up from
// here: its key is deleted once its counters have not moved for
// foreignIdle, and counts from zero if it comes back.

// foreignIdle is how long a key the exporter cannot check stays without
// counting before it is deleted.
const foreignIdle = 10 * time.Minute

// fate is what a key's objects are now.
type fate int

const (
	keyLive    fate = iota
	keyGone         // a device, program or map of the key no longer exists
	keyUnknown      // the exporter cannot tell (a device of another namespace)
)

// worst combines the fates of a key's objects.
func worst(fs ...fate) fate {
	out := keyLive
	for _, f := range fs {
		switch {
		case f == keyGone:
			return keyGone
		case f == keyUnknown:
			out = keyUnknown
		}
	}
	return out
}

// reaper decides which keys of one map to delete.
type reaper[K comparable] struct {
	idle time.Duration
	now  func() time.Time

	mu   sync.Mutex
	prev map[K]reapState
}

// reapState is a key as the last sweep saw it: its activity (a sum of
// counters, which only grow) and since when that has not changed.
type reapState struct {
	activity uint64
	since    time.Time
}

func newReaper[K comparable](idle time.Duration) *reaper[K] {
	if idle == 0 {
		idle = foreignIdle
	}
	return &reaper[K]{idle: idle, now: time.Now, prev: map[K]reapState{}}
}

// sweep takes every key read by this Update with its activity and returns
// whether each is to be deleted: a key the previous sweep saw whose fate is
// now keyGone, or a keyUnknown one idle for r.idle.
func (r *reaper[K]) sweep(keys []K, activity []uint64, fateOf func(K) fate) []bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	next := make(map[K]reapState, len(keys))
	stale := make([]bool, len(keys))
	for i, k := range keys {
		st := reapState{activity: activity[i], since: now}
		p, seen := r.prev[k]
		if seen && p.activity == st.activity {
			st.since = p.since
		}
		switch fateOf(k) {
		case keyGone:
			stale[i] = seen
		case keyUnknown:
			stale[i] = now.Sub(st.since) >= r.idle
		}
		if !stale[i] {
			next[k] = st
		}
	}
	r.prev = next
	return stale
}

// liveness answers whether program and map ids still exist, each asked of
// the kernel once per Update.
type liveness struct {
	progs, maps map[uint32]fate
}

func newLiveness() *liveness {
	return &liveness{progs: map[uint32]fate{}, maps: map[uint32]fate{}}
}

func (l *liveness) prog(id uint32) fate {
	return l.ask(l.progs, id, func() (interface{ Close() error }, error) {
		return ebpf.NewProgramFromID(ebpf.ProgramID(id))
	})
}

func (l *liveness) bpfMap(id uint32) fate {
	return l.ask(l.maps, id, func() (interface{ Close() error }, error) {
		return ebpf.NewMapFromID(ebpf.MapID(id))
	})
}

// ask opens the object by id: gone when the kernel has no such id, unknown
// when it refuses to say (no CAP_SYS_ADMIN).
func (l *liveness) ask(cache map[uint32]fate, id uint32, open func() (interface{ Close() error }, error)) fate {
	if f, ok := cache[id]; ok {
		return f
	}
	obj, err := open()
	f := keyLive
	switch {
	case err == nil:
		obj.Close()
	case errors.Is(err, os.ErrNotExist):
		f = keyGone
	default:
		f = keyUnknown
	}
	cache[id] = f
	return f
}

// deviceFate is the fate of a device as the BPF programs record it.
func deviceFate(links *Links, ownNetns uint64, netns uint64, ifindex uint32) fate {
	if netns != ownNetns {
		return keyUnknown
	}
	if _, ok := links.Get(ifindex); ok || links.partial {
		return keyLive
	}
	return keyGone
}

// slotTable is a slot table's three maps (bpf/slots.h).
type slotTable struct{ owners, claims, values *ebpf.Map }

// freeSlots returns slots of a slot table to the free pool: their values
// are zeroed first, then the owner cleared and the claim deleted, so a key
// that claims the slot afterwards starts from zero. Nothing counts in
// between: the slots belong to a key whose objects are gone.
func freeSlots[V any](t slotTable, slots []uint32) error {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	zero := make([]V, cpus)
	for _, i := range slots {
		if err := t.values.Update(i, zero, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("zeroing slot %d: %w", i, err)
		}
		if err := t.owners.Update(i, slotOwner{}, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("freeing slot %d: %w", i, err)
		}
		if err := t.claims.Delete(i); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting the claim of slot %d: %w", i, err)
		}
	}
	return nil
}

// reapSlots sweeps a slot table read by readSlots and frees the slots of
// stale keys; it returns the entries to report.
func reapSlots[V any](r *reaper[slotKey], t slotTable, entries []slotCounts[V],
	activity func(slotCounts[V]) uint64, fateOf func(slotKey) fate) ([]slotCounts[V], error) {
	keys := make([]slotKey, len(entries))
	acts := make([]uint64, len(entries))
	for i, e := range entries {
		keys[i], acts[i] = e.key, activity(e)
	}
	stale := r.sweep(keys, acts, fateOf)
	kept := entries[:0:0]
	var errs []error
	for i, e := range entries {
		if !stale[i] {
			kept = append(kept, e)
			continue
		}
		errs = append(errs, freeSlots[V](t, e.index))
	}
	return kept, errors.Join(errs...)
}
