// Package slots reads and frees the slot tables of slots.h, the exact
// per-key counters of the tracepoint programs: a table's keys are a C
// struct of the program's, generated for Go by bpf2go, and its values a
// per-CPU struct.
package slots

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
)

// Table is one slot table: its owners (of key type K), claims and per-CPU
// values (of V), and the reaper that frees the slots of gone keys.
type Table[K comparable, V any] struct {
	owners, claims, values *ebpf.Map
	reaper                 *reap.Reaper[K]
}

// New returns the table of the three maps, whose slots of keys that
// cannot be checked (reap.Unknown) are freed after idle without counting.
// K must have the 16 bytes of struct slot_owner.
func New[K comparable, V any](owners, claims, values *ebpf.Map, idle time.Duration) (*Table[K, V], error) {
	var k K
	if unsafe.Sizeof(k) != unsafe.Sizeof(words{}) || owners.ValueSize() != uint32(unsafe.Sizeof(k)) {
		return nil, fmt.Errorf("slot table %s: key of %d bytes, owners of %d, want %d", values, unsafe.Sizeof(k), owners.ValueSize(), unsafe.Sizeof(words{}))
	}
	return &Table[K, V]{owners: owners, claims: claims, values: values, reaper: reap.New[K](idle)}, nil
}

// words is struct slot_owner: a key as slot_find compares it.
type words struct{ k0, k1 uint64 }

// claimed tells a slot that counts for its key from a free one (first
// word 0) and from one whose claim is in progress (second word 0).
func claimed[K any](k *K) bool {
	w := (*words)(unsafe.Pointer(k))
	return w.k0 != 0 && w.k1 != 0
}

// Entry is one key's counters: the per-CPU values of every slot that
// counts it (usually one; two when CPUs raced to claim a slot).
type Entry[K comparable, V any] struct {
	Key K
	// Slots are the key's slots, in table order.
	Slots []uint32
	// PerCPU holds the values of each slot, per CPU.
	PerCPU [][]V
}

// Each calls f with every per-CPU value of the entry's slots.
func (e Entry[K, V]) Each(f func(cpu int, v *V)) {
	for _, slot := range e.PerCPU {
		for cpu := range slot {
			f(cpu, &slot[cpu])
		}
	}
}

// Read reads the table and frees the slots of keys that fateOf finds gone
// (or idle while unknown); it returns the other entries. activity is a
// key's sum of counters, which grows while it counts.
func (t *Table[K, V]) Read(activity func(Entry[K, V]) uint64, fateOf func(K) reap.Fate) ([]Entry[K, V], error) {
	entries, err := t.read()
	if err != nil {
		return nil, err
	}
	keys := make([]K, len(entries))
	acts := make([]uint64, len(entries))
	for i, e := range entries {
		keys[i], acts[i] = e.Key, activity(e)
	}
	stale := t.reaper.Sweep(keys, acts, fateOf)
	kept := entries[:0:0]
	var errs []error
	for i, e := range entries {
		if !stale[i] {
			kept = append(kept, e)
			continue
		}
		errs = append(errs, t.free(e.Slots))
	}
	if err := errors.Join(errs...); err != nil {
		return kept, fmt.Errorf("freeing the %s slots of gone keys: %w", t.values, err)
	}
	return kept, nil
}

// read reads the owners with one batch lookup, then the per-CPU values of
// each claimed slot, grouped by key in slot order. A slot whose claim is
// still in progress is skipped: nothing can have counted in it yet.
func (t *Table[K, V]) read() ([]Entry[K, V], error) {
	n := int(t.owners.MaxEntries())
	keys := make([]uint32, n)
	own := make([]K, n)
	var cursor ebpf.MapBatchCursor
	got, err := t.owners.BatchLookup(&cursor, keys, own, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, fmt.Errorf("reading the owners of %s: %w", t.values, err)
	}
	var out []Entry[K, V]
	index := map[K]int{}
	for i := range got {
		if !claimed(&own[i]) {
			continue
		}
		var perCPU []V
		if err := t.values.Lookup(keys[i], &perCPU); err != nil {
			return nil, fmt.Errorf("reading slot %d of %s: %w", keys[i], t.values, err)
		}
		j, ok := index[own[i]]
		if !ok {
			j = len(out)
			index[own[i]] = j
			out = append(out, Entry[K, V]{Key: own[i]})
		}
		out[j].Slots = append(out[j].Slots, keys[i])
		out[j].PerCPU = append(out[j].PerCPU, perCPU)
	}
	return out, nil
}

// free returns slots to the free pool: their values are zeroed first, then
// the owner cleared and the claim deleted, so a key that claims the slot
// afterwards starts from zero. Nothing counts in between: the slots belong
// to a key whose objects are gone.
func (t *Table[K, V]) free(slots []uint32) error {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	zero := make([]V, cpus)
	var free K
	for _, i := range slots {
		if err := t.values.Update(i, zero, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("zeroing slot %d: %w", i, err)
		}
		if err := t.owners.Update(i, free, ebpf.UpdateExist); err != nil {
			return fmt.Errorf("freeing slot %d: %w", i, err)
		}
		if err := t.claims.Delete(i); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			return fmt.Errorf("deleting the claim of slot %d: %w", i, err)
		}
	}
	return nil
}

// Put claims the highest free slot for key as slot_find does, with the
// given per-CPU values: how tests and benchmarks fill a table without the
// traffic that would.
func (t *Table[K, V]) Put(key K, perCPU []V) error {
	for slot := t.owners.MaxEntries(); slot > 0; slot-- {
		if t.claims.Update(slot-1, uint64(1), ebpf.UpdateNoExist) != nil {
			continue
		}
		if err := t.values.Update(slot-1, perCPU, ebpf.UpdateExist); err != nil {
			return err
		}
		return t.owners.Update(slot-1, key, ebpf.UpdateExist)
	}
	return fmt.Errorf("slot table %s is full", t.values)
}

// Claimed counts the claimed slots, for tests of reaping.
func (t *Table[K, V]) Claimed() (int, error) {
	entries, err := t.read()
	n := 0
	for _, e := range entries {
		n += len(e.Slots)
	}
	return n, err
}

// DeviceName turns struct dev_name, the two words of a device name a
// program recorded, into the name: the NUL-terminated bytes they hold (the
// programs are little endian only).
func DeviceName(words [2]uint64) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], words[0])
	binary.LittleEndian.PutUint64(b[8:], words[1])
	return unix.ByteSliceToString(b[:])
}

// Counter reads entry key of a per-CPU array of u64 counters (a table's
// untracked events) summed over CPUs.
func Counter(m *ebpf.Map, key uint32) (uint64, error) {
	var counts []uint64
	if err := m.Lookup(key, &counts); err != nil {
		return 0, err
	}
	var t uint64
	for _, n := range counts {
		t += n
	}
	return t, nil
}
