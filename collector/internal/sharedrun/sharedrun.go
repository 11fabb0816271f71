// Package sharedrun runs a function once for every caller that asks while
// it runs: the callers read the items it produces as they come, and the
// run lasts until the latest of their deadlines, never ending at the
// deadline or the departure of the caller that happened to start it.
package sharedrun

import (
	"context"
	"sync"
	"time"
)

// Run is one run in progress: the items it has produced so far and, once
// Done is closed, its result.
type Run[T, R any] struct {
	started time.Time
	done    chan struct{}
	res     R // once done is closed

	mu      sync.Mutex
	sent    []T           // append-only
	wake    chan struct{} // closed on the next append, for waiting readers
	waiting bool          // a reader holds wake

	ctx       context.Context
	cancel    context.CancelFunc
	latest    time.Time   // guarded by mu
	unbounded bool        // a caller without a deadline joined; guarded by mu
	timer     *time.Timer // cancels ctx at latest; guarded by mu
}

// Start runs f in its own goroutine for the caller of ctx, under a context
// that ends at the latest deadline of the callers that Join (and not
// before floor, when it is not zero), then calls finished before closing
// Done. f hands each item to add, which never blocks.
func Start[T, R any](ctx context.Context, floor time.Duration, f func(ctx context.Context, add func(T)) R, finished func()) *Run[T, R] {
	r := &Run[T, R]{started: time.Now(), done: make(chan struct{}), wake: make(chan struct{})}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	if floor > 0 {
		r.latest = r.started.Add(floor)
		r.timer = time.AfterFunc(floor, r.cancel)
	}
	r.Join(ctx)
	go func() {
		r.res = f(r.ctx, r.add)
		r.mu.Lock()
		if r.timer != nil {
			r.timer.Stop()
		}
		r.mu.Unlock()
		r.cancel()
		finished()
		close(r.done) // readers wait on done beside wake
	}()
	return r
}

// Join extends the run's deadline to the joining caller's: it runs until
// the latest deadline of its callers, without one when a caller has none.
// A caller that joins after the run's context ended gets that run's
// result.
func (r *Run[T, R]) Join(ctx context.Context) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.unbounded {
		return
	}
	d, ok := ctx.Deadline()
	if !ok {
		r.unbounded = true
		if r.timer != nil {
			r.timer.Stop()
		}
		return
	}
	if !d.After(r.latest) {
		return
	}
	r.latest = d
	if r.timer == nil {
		r.timer = time.AfterFunc(time.Until(d), r.cancel)
		return
	}
	r.timer.Reset(time.Until(d))
}

// add records one item and wakes the readers.
func (r *Run[T, R]) add(item T) {
	r.mu.Lock()
	r.sent = append(r.sent, item)
	if r.waiting {
		close(r.wake)
		r.wake, r.waiting = make(chan struct{}), false
	}
	r.mu.Unlock()
}

// Next returns the items after the first from, and a channel that is
// closed when there may be more (or the run ends); nil when it returned
// items.
func (r *Run[T, R]) Next(from int) ([]T, <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if from < len(r.sent) {
		return r.sent[from:], nil
	}
	r.waiting = true
	return nil, r.wake
}

// Done is closed when the run has ended.
func (r *Run[T, R]) Done() <-chan struct{} { return r.done }

// Result is f's result, once Done is closed.
func (r *Run[T, R]) Result() R { return r.res }

// Age is how long the run has been running.
func (r *Run[T, R]) Age() time.Duration { return time.Since(r.started) }
