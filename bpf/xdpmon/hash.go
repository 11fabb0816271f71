package xdpmon

import (
	"errors"
	"fmt"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
)

// hashTable is a per-CPU hash map of counters (exceptions, redirects) and
// the reaper of its keys.
type hashTable[K comparable] struct {
	m      *ebpf.Map
	reaper *reap.Reaper[K]
}

func newHashTable[K comparable](m *ebpf.Map, idle time.Duration) *hashTable[K] {
	return &hashTable[K]{m: m, reaper: reap.New[K](idle)}
}

// read reads the map, deletes the keys whose objects are gone, and returns
// the others with their sums, and the deleted ones with their last sums.
func (h *hashTable[K]) read(fateOf func(K) reap.Fate) (live, gone []Count[K], err error) {
	var (
		all    []Count[K]
		k      K
		counts []uint64
	)
	it := h.m.Iterate()
	for it.Next(&k, &counts) {
		all = append(all, Count[K]{Key: k, Count: sum(counts)})
	}
	if err := it.Err(); err != nil {
		return nil, nil, fmt.Errorf("reading %s: %w", h.m, err)
	}
	keys := make([]K, len(all))
	sums := make([]uint64, len(all))
	for i, c := range all {
		keys[i], sums[i] = c.Key, c.Count
	}
	stale := h.reaper.Sweep(keys, sums, fateOf)
	var errs []error
	for i, c := range all {
		if !stale[i] {
			live = append(live, c)
			continue
		}
		if err := h.m.Delete(c.Key); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("deleting a key of %s whose device or program is gone: %w", h.m, err))
			continue
		}
		gone = append(gone, c)
	}
	return live, gone, errors.Join(errs...)
}

// put adds counts to a key on CPU 0, as the programs would: how tests fill
// the map without the failures that would.
func (h *hashTable[K]) put(k K, n uint64) error {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	counts := make([]uint64, cpus)
	counts[0] = n
	return h.m.Update(k, counts, ebpf.UpdateAny)
}

// PutException counts n exceptions of k, for tests and benchmarks.
func (m *Monitor) PutException(k XdpmonExceptionKey, n uint64) error { return m.exceptions.put(k, n) }

// PutRedirect counts n redirects of k, for tests and benchmarks.
func (m *Monitor) PutRedirect(k XdpmonRedirectKey, n uint64) error { return m.redirects.put(k, n) }
