package collector

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
)

// slotK1 is SLOT_K1 of bpf/slots.h: set in the second word of every key.
const slotK1 = 1 << 63

// slotKey is the key of a slot table (bpf/slots.h), SLOT_K1 cleared.
type slotKey struct{ k0, k1 uint64 }

// slotOwner mirrors struct slot_owner.
type slotOwner struct{ K0, K1 uint64 }

// slotCounts is one key's counters: the per-CPU values of every slot that
// counts it (usually one; two when CPUs raced to claim a slot).
type slotCounts[V any] struct {
	key   slotKey
	index []uint32 // the slots, in table order
	slots [][]V    // their per-CPU values
}

// readSlots reads a slot table: its owners with one batch lookup, then the
// per-CPU values of each claimed slot, grouped by key in slot order. A
// slot whose claim is still in progress (k1 not yet written) is skipped:
// nothing can have counted in it yet.
func readSlots[V any](owners, values *ebpf.Map) ([]slotCounts[V], error) {
	n := int(owners.MaxEntries())
	keys := make([]uint32, n)
	own := make([]slotOwner, n)
	var cursor ebpf.MapBatchCursor
	got, err := owners.BatchLookup(&cursor, keys, own, nil)
	if err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
		return nil, fmt.Errorf("reading slot owners: %w", err)
	}
	var out []slotCounts[V]
	index := map[slotKey]int{}
	for i := range got {
		o := own[i]
		if o.K0 == 0 || o.K1&slotK1 == 0 {
			continue
		}
		var perCPU []V
		if err := values.Lookup(keys[i], &perCPU); err != nil {
			return nil, fmt.Errorf("reading slot %d: %w", keys[i], err)
		}
		k := slotKey{o.K0, o.K1 &^ slotK1}
		j, ok := index[k]
		if !ok {
			j = len(out)
			index[k] = j
			out = append(out, slotCounts[V]{key: k})
		}
		out[j].index = append(out[j].index, keys[i])
		out[j].slots = append(out[j].slots, perCPU)
	}
	return out, nil
}

// devWord unpacks dev_word of bpf/xdpmon.c: a namespace inode above an
// ifindex.
func devWord(w uint64) devKey {
	return devKey{ifindex: uint32(w & (1<<31 - 1)), netns: uint32(w >> 31)}
}

// devKey is a device as the BPF programs see it: ifindex and the inode of
// its network namespace.
type devKey struct{ ifindex, netns uint32 }
