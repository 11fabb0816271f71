// Package trafficgen sends real frames out of a veth end with the kernel's
// live-frame mode of BPF_PROG_RUN (BPF_F_TEST_XDP_LIVE_FRAMES), the method
// xdp-tools' xdp-trafficgen uses. One worker per CPU, each pinned; on veth
// the receiving RX queue is the sending CPU modulo the peer's queue count,
// so pinning spreads flows over RX queues deterministically.
//
// Kernels before 5.18 have no live-frame mode; there a worker sends the
// same frames through an AF_PACKET socket with PACKET_QDISC_BYPASS, whose
// transmit queue is also the sending CPU modulo the queue count (see
// afpacket.go).
package trafficgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// bpfFTestXDPLiveFrames is BPF_F_TEST_XDP_LIVE_FRAMES from linux/bpf.h.
const bpfFTestXDPLiveFrames = 1 << 1

// MinFrameSize is the smallest frame the generator builds: Ethernet + IPv4
// + UDP headers with no payload, padded to the Ethernet minimum without FCS.
const MinFrameSize = 60

// MethodEnv set to "packet" makes every run send through AF_PACKET, as on
// kernels without live frames. The kernel matrix sets it in its guests:
// under QEMU's emulator a live-frame run fills veth's 256-frame ring
// faster than NAPI drains it on kernels that leave NET_RX to ksoftirqd
// once it is woken (seen on 6.1: 11,456 of 100,000 frames lost at the
// ring), while one frame per sendto(2) runs the receive before returning.
const MethodEnv = "XDP_EXPORTER_TRAFFICGEN_METHOD"

// Config describes one run.
type Config struct {
	// NS is the namespace the sending device lives in; netns.None() for
	// the caller's own.
	NS netns.NsHandle
	// Ifindex is the sending device, inside NS.
	Ifindex int
	// SrcMAC and DstMAC fill the Ethernet header.
	SrcMAC, DstMAC net.HardwareAddr
	// SrcIP and DstIP fill the IPv4 header; 198.18.0.1 and 198.18.0.2
	// (the default lab's ends) when nil.
	SrcIP, DstIP net.IP
	// Size is the frame size in bytes without FCS (60 = a 64-byte frame on
	// the wire); MinFrameSize when zero.
	Size int
	// Count is the total number of frames, split evenly over CPUs; 0 means
	// run until ctx ends.
	Count uint64
	// Rate is the total frames per second; 0 means as fast as possible.
	Rate float64
	// CPUs lists the CPUs to send from, one worker each; CPU 0 when empty.
	CPUs []int
	// Slice, when not zero, is the number of frames each worker sends per
	// BPF_PROG_RUN call (at most 1<<32 - 1), instead of slices sized by
	// time. A measurement that samples counters while one long call runs
	// then sees no call set-up inside its window.
	Slice uint64
}

// Generator owns the loaded generator program.
type Generator struct {
	objs       trafficgenObjects
	packetSent atomic.Uint64
	packetUsed atomic.Bool
}

// UsesPacketSocket reports whether a run has sent through AF_PACKET
// because the kernel has no live frames: the frames then reach the peer
// as skbs, which some counters (veth's XDP bytes) measure differently.
func (g *Generator) UsesPacketSocket() bool { return g.packetUsed.Load() }

// New loads the generator program. It needs CAP_BPF (or root).
func New() (*Generator, error) {
	g := &Generator{}
	if err := loadTrafficgenObjects(&g.objs, nil); err != nil {
		return nil, fmt.Errorf("loading the traffic generator program: %w", err)
	}
	return g, nil
}

// Close releases the program and its map.
func (g *Generator) Close() error { return g.objs.Close() }

// Sent returns the frames handed to the kernel since New, summed over CPUs.
func (g *Generator) Sent() (uint64, error) {
	var perCPU []uint64
	if err := g.objs.Sent.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("reading the sent counter: %w", err)
	}
	var total uint64
	for _, n := range perCPU {
		total += n
	}
	return total, nil
}

// xdpMd mirrors struct xdp_md, the context BPF_PROG_RUN takes for XDP.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

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

// Run sends frames until Count is reached or ctx ends and returns the
// number this run sent, as counted by the program.
func (g *Generator) Run(ctx context.Context, cfg Config) (uint64, error) {
	if cfg.Size == 0 {
		cfg.Size = MinFrameSize
	}
	if cfg.Size < MinFrameSize {
		return 0, fmt.Errorf("frame size %d below the minimum %d", cfg.Size, MinFrameSize)
	}
	if len(cfg.CPUs) == 0 {
		cfg.CPUs = []int{0}
	}
	before, err := g.Sent()
	if err != nil {
		return 0, err
	}
	var wg sync.WaitGroup
	errs := make([]error, len(cfg.CPUs))
	// One start for every worker: paced, their slices fall due at the same
	// instants. Each worker timing itself from its own start (after its
	// thread setup) left the workers a random, lasting offset: how often
	// two CPUs' slices met on one ring, and so whether a burst overflowed
	// it, changed from run to run (the fleet test saw 0 to 27,000
	// drops a second at the same rate).
	start := time.Now()
	for i, cpu := range cfg.CPUs {
		count := cfg.Count / uint64(len(cfg.CPUs))
		if uint64(i) < cfg.Count%uint64(len(cfg.CPUs)) {
			count++
		}
		frame := Frame(cfg.SrcMAC, cfg.DstMAC, cfg.SrcIP, cfg.DstIP, uint16(1024+i), cfg.Size)
		w := worker{prog: g.objs.XdpTrafficgen, cfg: cfg, cpu: cpu, count: count, start: start,
			rate: cfg.Rate / float64(len(cfg.CPUs)), frame: frame, packetSent: &g.packetSent, packetUsed: &g.packetUsed}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run(ctx)
		}()
	}
	wg.Wait()
	after, err := g.Sent()
	if err != nil {
		return 0, err
	}
	return after - before + g.packetSent.Swap(0), errors.Join(errs...)
}

type worker struct {
	prog  *ebpf.Program
	cfg   Config
	cpu   int
	count uint64 // 0: until ctx ends
	rate  float64
	start time.Time // when the run started, which pacing counts from
	frame []byte
	// packetSent counts the frames sent through AF_PACKET, which the
	// program's counter does not see; packetUsed says one was.
	packetSent *atomic.Uint64
	packetUsed *atomic.Bool
}

func (w worker) run(ctx context.Context) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var set unix.CPUSet
	set.Set(w.cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return fmt.Errorf("pinning to CPU %d: %w", w.cpu, err)
	}
	// A signal arriving during BPF_PROG_RUN (Go's preemption signal among
	// them) ends the call with EINTR after some batches, and cilium/ebpf
	// then runs the whole repeat count again: frames beyond Count. Blocking
	// signals on this locked thread for the run keeps counts exact; the
	// process still gets them on its other threads.
	var all, old unix.Sigset_t
	for i := range all.Val {
		all.Val[i] = ^uint64(0)
	}
	if err := unix.PthreadSigmask(unix.SIG_BLOCK, &all, &old); err != nil {
		return fmt.Errorf("blocking signals on the generator thread: %w", err)
	}
	defer unix.PthreadSigmask(unix.SIG_SETMASK, &old, nil)
	send := func() error { return w.loop(ctx) }
	if w.cfg.NS.IsOpen() {
		return vethns.InNamespace(w.cfg.NS, send)
	}
	return send()
}

func (w worker) loop(ctx context.Context) error {
	if os.Getenv(MethodEnv) == "packet" {
		w.packetUsed.Store(true)
		return w.packetLoop(ctx)
	}
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
		if _, err := w.prog.Run(opts); err != nil {
			if done == 0 && errors.Is(err, unix.EINVAL) {
				// XDP test runs take no flags before Linux 5.18 ("bpf:
				// Add "live packet" mode for XDP in BPF_PROG_RUN"):
				// nothing was sent, so send another way.
				w.packetUsed.Store(true)
				return w.packetLoop(ctx)
			}
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

// pace waits until done frames are due at rate frames per second since
// start; false when ctx ends first.
func pace(ctx context.Context, start time.Time, done uint64, rate float64) bool {
	d := time.Until(start.Add(time.Duration(float64(done) / rate * float64(time.Second))))
	if d <= 0 {
		return true
	}
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}

// Frame builds an Ethernet/IPv4/UDP frame of size bytes (without FCS) from
// srcIP to dstIP (198.18.0.1 to 198.18.0.2, RFC 2544's benchmark range,
// where nil) with the given UDP source port, so each worker is its own
// flow.
func Frame(src, dst net.HardwareAddr, srcIP, dstIP net.IP, srcPort uint16, size int) []byte {
	f := make([]byte, size)
	copy(f[0:6], dst)
	copy(f[6:12], src)
	binary.BigEndian.PutUint16(f[12:], unix.ETH_P_IP)
	ip := f[14:34]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(size-14))
	ip[8] = 64
	ip[9] = unix.IPPROTO_UDP
	if srcIP == nil {
		srcIP = net.IPv4(198, 18, 0, 1)
	}
	if dstIP == nil {
		dstIP = net.IPv4(198, 18, 0, 2)
	}
	copy(ip[12:16], srcIP.To4())
	copy(ip[16:20], dstIP.To4())
	binary.BigEndian.PutUint16(ip[10:], ipChecksum(ip))
	udp := f[34:42]
	binary.BigEndian.PutUint16(udp[0:], srcPort)
	binary.BigEndian.PutUint16(udp[2:], 9) // discard
	binary.BigEndian.PutUint16(udp[4:], uint16(size-34))
	return f
}

func ipChecksum(h []byte) uint16 {
	var sum uint32
	for i := 0; i < len(h); i += 2 {
		sum += uint32(binary.BigEndian.Uint16(h[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return ^uint16(sum)
}
