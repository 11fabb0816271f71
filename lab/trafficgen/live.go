package trafficgen

import (
	"context"
	"fmt"
	"time"

	"github.com/cilium/ebpf"
)

// bpfFTestXDPLiveFrames is BPF_F_TEST_XDP_LIVE_FRAMES from linux/bpf.h.
const bpfFTestXDPLiveFrames = 1 << 1

// Each live-frame BPF_PROG_RUN call pays a fixed set-up and tear-down cost
// (a page pool is created and destroyed per call: 20-80 ms measured on the
// development VM), so frames are sent in large slices: as fast as possible,
// a slice grows until one call takes sliceTarget; paced, a slice holds
// pacedSlice worth of frames at the requested rate. Within a call the
// kernel flushes every 64 frames (the default batch size) and lets NAPI
// drain veth's 256-frame ring, so no frame is lost to a full ring.
const (
	sliceTarget = 500 * time.Millisecond
	pacedSlice  = 100 * time.Millisecond
	minSlice    = 1 << 16
	maxSlice    = 1 << 24
)

// liveLoop sends the worker's frames with live-frame BPF_PROG_RUN calls of
// xdp_trafficgen, which counts each frame and returns XDP_TX: in live mode
// a transmit out of the device the run names as ingress.
func (w worker) liveLoop(ctx context.Context) error {
	opts := &ebpf.RunOptions{
		Data:    w.frame,
		Flags:   bpfFTestXDPLiveFrames,
		Context: xdpMd{DataEnd: uint32(len(w.frame)), IngressIfindex: uint32(w.cfg.Ifindex)},
	}
	chunk := uint64(minSlice)
	if w.rate > 0 {
		chunk = max(1, uint64(w.rate*pacedSlice.Seconds()))
	}
	fixed := w.cfg.Slice > 0
	if fixed {
		chunk = min(w.cfg.Slice, 1<<32-1)
	}
	deadline, timed := ctx.Deadline()
	start := w.start
	var done uint64
	for w.count == 0 || done < w.count {
		if ctx.Err() != nil {
			return nil
		}
		n := chunk
		if w.count > 0 {
			n = min(n, w.count-done)
		}
		if timed && w.rate == 0 && done > 0 && !fixed {
			// Do not overrun the deadline by more than about a slice's
			// overhead: scale to the time left at the rate seen so far.
			left := time.Until(deadline).Seconds() * float64(done) / time.Since(start).Seconds()
			n = min(n, max(1, uint64(left)))
		}
		opts.Repeat = uint32(n)
		callStart := time.Now()
		if _, err := w.objs.XdpTrafficgen.Run(opts); err != nil {
			return fmt.Errorf("BPF_PROG_RUN live frames on ifindex %d, CPU %d: %w", w.cfg.Ifindex, w.cpu, err)
		}
		done += n
		if w.rate == 0 {
			took := time.Since(callStart)
			if took < sliceTarget && n == chunk && !fixed {
				chunk = min(maxSlice, chunk*2)
			}
			continue
		}
		if !pace(ctx, start, done, w.rate) {
			return nil
		}
	}
	return nil
}
