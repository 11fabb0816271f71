// Package counter32 turns 32-bit kernel counters that wrap into 64-bit
// running totals.
package counter32

import "sync"

// Extender extends 32-bit counters that wrap (softnet_stat's columns: at
// 10 Mpps, processed wraps every 7 minutes) into 64-bit running totals:
// each reading adds the difference to the last reading modulo 2^32. The
// first reading is taken as it is. A wrap is seen as long as a counter is
// read at least once per wrap period.
type Extender[K comparable] struct {
	mu    sync.Mutex
	last  map[K]uint32
	total map[K]uint64
}

// Extend records the raw reading of counter k and returns its total.
func (w *Extender[K]) Extend(k K, raw uint32) uint64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.total == nil {
		w.last, w.total = map[K]uint32{}, map[K]uint64{}
	}
	last, seen := w.last[k]
	if !seen {
		w.total[k] = uint64(raw)
	} else {
		w.total[k] += uint64(raw - last)
	}
	w.last[k] = raw
	return w.total[k]
}
