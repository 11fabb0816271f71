package trafficgen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"golang.org/x/sys/unix"
)

// packetLoop sends the worker's frames through an AF_PACKET socket bound
// to the device, one sendto(2) each, for kernels without live frames.
// PACKET_QDISC_BYPASS hands each frame straight to the driver on the
// transmit queue of the sending CPU (modulo the queue count), as live
// frames do; on veth the frame's RX processing (NAPI, with XDP on the
// peer) then runs in the softirq that the send's bottom-half exit runs on
// this CPU, before sendto returns, so the peer's 256-frame XDP ring never
// overflows and every frame sent is a frame received.
// refusalLimit bounds how long the device may refuse frames (ENOBUFS: its
// queue stopped, or its carrier down) before a run fails.
const refusalLimit = 2 * time.Second

func (w worker) packetLoop(ctx context.Context) error {
	fd, err := packetSocket(w.cfg.Ifindex)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Ifindex: w.cfg.Ifindex}
	start := w.start
	var done uint64
	var refusedSince time.Time
	for w.count == 0 || done < w.count {
		if done%1024 == 0 {
			if ctx.Err() != nil {
				return nil
			}
			if w.rate > 0 && !pace(ctx, start, done, w.rate) {
				return nil
			}
		}
		err := unix.Sendto(fd, w.frame, 0, to)
		if errors.Is(err, unix.ENOBUFS) || errors.Is(err, unix.EAGAIN) {
			// The driver's queue is full or stopped: the frame was not
			// sent. Try again, for a while.
			if refusedSince.IsZero() {
				refusedSince = time.Now()
			}
			if time.Since(refusedSince) > refusalLimit {
				return fmt.Errorf("AF_PACKET send on ifindex %d, CPU %d: the device refused every frame for %s: %w", w.cfg.Ifindex, w.cpu, refusalLimit, err)
			}
			continue
		}
		refusedSince = time.Time{}
		if err != nil {
			return fmt.Errorf("AF_PACKET send on ifindex %d, CPU %d: %w", w.cfg.Ifindex, w.cpu, err)
		}
		w.counted.Add(1)
		done++
	}
	return nil
}

// packetSocket opens an AF_PACKET socket that sends out of ifindex, in the
// calling thread's namespace, past the qdisc.
func packetSocket(ifindex int) (int, error) {
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("AF_PACKET socket: %w", err)
	}
	if err := unix.SetsockoptInt(fd, unix.SOL_PACKET, unix.PACKET_QDISC_BYPASS, 1); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("PACKET_QDISC_BYPASS: %w", err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Ifindex: ifindex}); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("binding AF_PACKET to ifindex %d: %w", ifindex, err)
	}
	return fd, nil
}
