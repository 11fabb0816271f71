// Package parallel runs a function over a range of indexes on a bounded
// number of goroutines.
package parallel

import (
	"context"
	"sync"
	"sync/atomic"
)

// Each calls f(i) for i in [0, n) on at most workers goroutines, in index
// order per goroutine, and returns the errors f returned, joined in no
// particular order. It stops starting calls once ctx is done and then
// returns ctx's error too. A panic in f is not recovered: f recovers its
// own, since only the goroutine of a scrape's Update has a recover.
func Each(ctx context.Context, n, workers int, f func(i int) error) []error {
	var (
		next  atomic.Int64
		errMu sync.Mutex
		errs  []error
		wg    sync.WaitGroup
	)
	for range min(workers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					errMu.Lock()
					errs = append(errs, err)
					errMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return errs
}
