// Package trafficgen sends real frames out of a veth end at kernel speed,
// by the fastest method the kernel allows (see Method): live frames of
// BPF_PROG_RUN (BPF_F_TEST_XDP_LIVE_FRAMES), the method xdp-tools'
// xdp-trafficgen uses; where they are refused, a devmap broadcast that
// one frame looping between two veth ends of the generator's own keeps
// going (broadcast.go); and last one AF_PACKET sendto(2) a frame
// (afpacket.go). Each is exact: the count a run returns is the count the
// receiving end was handed, or the run fails.
//
// One worker per CPU, each pinned; with every method the frame leaves on
// the transmit queue of the sending CPU, and on veth the receiving RX
// queue is the sending CPU modulo the peer's queue count, so pinning
// spreads flows over RX queues deterministically.
package trafficgen

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cilium/ebpf"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// MinFrameSize is the smallest frame the generator builds: Ethernet + IPv4
// + UDP headers with no payload, padded to the Ethernet minimum without FCS.
const MinFrameSize = 60

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
	// then sees no call set-up inside its window. Only live frames have
	// calls; the other methods have no set-up to hide.
	Slice uint64
	// Method forces a method; empty leaves it to MethodEnv, then to the
	// fastest the kernel allows (Generator.Choose).
	Method Method
	// MayLose lets the receiver lose frames, as a flood wants (more than
	// one CPU into one queue, a receiver slower than the sender): the run
	// then returns the count sent without checking that the peer took
	// them all.
	MayLose bool
}

// Generator owns the loaded generator programs; broadcast runs use the
// process's broadcast loop (broadcast.go).
type Generator struct {
	objs trafficgenObjects
	// counted is what the generator sent through AF_PACKET or the
	// broadcast loop, which its own counter does not see.
	counted atomic.Uint64

	mu     sync.Mutex
	choice Choice // the last run's
}

// UsesPacketSocket reports whether the last run sent through AF_PACKET:
// the frames then reach the peer as skbs, which some counters (veth's XDP
// bytes) measure differently.
func (g *Generator) UsesPacketSocket() bool { return g.Choice().Method == Packet }

// Choice returns the method the last run used and why; zero before a run.
func (g *Generator) Choice() Choice {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.choice
}

// New loads the generator's programs. It needs CAP_BPF (or root).
func New() (*Generator, error) {
	g := &Generator{}
	if err := load(&g.objs); err != nil {
		return nil, err
	}
	return g, nil
}

// load loads the generator's programs and maps into objs, the maps sized
// for this machine's CPUs and the fan's copies.
func load(objs *trafficgenObjects) error {
	spec, err := loadTrafficgen()
	if err != nil {
		return fmt.Errorf("loading the traffic generator program: %w", err)
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return err
	}
	spec.Maps[trafficgenMapFanTarget].MaxEntries = uint32(cpus)
	spec.Maps[trafficgenMapFan].MaxEntries = 1 + fanCopies
	if err := spec.LoadAndAssign(objs, nil); err != nil {
		return fmt.Errorf("loading the traffic generator program: %w", err)
	}
	return nil
}

// Close releases the programs and their maps.
func (g *Generator) Close() error { return g.objs.Close() }

// Sent returns the frames handed to the kernel since New, summed over CPUs
// and methods.
func (g *Generator) Sent() (uint64, error) {
	var perCPU []uint64
	if err := g.objs.Sent.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("reading the sent counter: %w", err)
	}
	total := g.counted.Load()
	for _, n := range perCPU {
		total += n
	}
	return total, nil
}

// xdpMd mirrors struct xdp_md, the context BPF_PROG_RUN takes for XDP.
type xdpMd struct {
	Data, DataEnd, DataMeta, IngressIfindex, RxQueueIndex, EgressIfindex uint32
}

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
	choice, err := g.Choose(cfg.Method)
	if err != nil {
		return 0, err
	}
	g.mu.Lock()
	g.choice = choice
	g.mu.Unlock()
	var bc *broadcaster
	if choice.Method == Broadcast {
		if bc, err = takeBroadcaster(); err != nil {
			return 0, err
		}
		defer bc.release()
		if err := bc.aim(cfg); err != nil {
			return 0, err
		}
	}
	// Live frames and the broadcast count a frame before veth queues it
	// on the peer's XDP ring, which may be full; AF_PACKET's sendto
	// returns once the peer has run it.
	// A device without veth's counters is not checked (see xdpXmit).
	check := !cfg.MayLose && choice.Method != Packet
	var xmitBefore uint64
	if check {
		var ok bool
		if xmitBefore, ok, err = xdpXmit(cfg.NS, cfg.Ifindex); err != nil {
			return 0, err
		}
		check = ok
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
		w := worker{objs: &g.objs, method: choice.Method, cfg: cfg, cpu: cpu, count: count, start: start,
			rate: cfg.Rate / float64(len(cfg.CPUs)), frame: frame, counted: &g.counted, broadcaster: bc}
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
	sent := after - before
	if err := errors.Join(errs...); err != nil || !check {
		return sent, err
	}
	return sent, checkDelivered(cfg, choice.Method, xmitBefore, sent)
}

// checkDelivered waits until the receiver has taken every frame counted
// as sent, and fails with the number lost if it does not: a receiver with
// a full ring, or without NAPI (no XDP program, GRO off), loses frames
// the counter has seen.
func checkDelivered(cfg Config, m Method, xmitBefore, sent uint64) error {
	deadline := time.Now().Add(drainWait)
	for {
		xmit, ok, err := xdpXmit(cfg.NS, cfg.Ifindex)
		if err != nil || !ok {
			return err
		}
		got := xmit - xmitBefore
		if got == sent {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: ifindex %d's peer took %d of the %d frames sent, %d lost (its XDP ring full, or no XDP program or GRO on the peer to run NAPI; Config.MayLose allows it)", m, cfg.Ifindex, got, sent, int64(sent)-int64(got))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

type worker struct {
	objs   *trafficgenObjects
	method Method
	cfg    Config
	cpu    int
	count  uint64 // 0: until ctx ends
	rate   float64
	start  time.Time // when the run started, which pacing counts from
	frame  []byte
	// counted is the generator's count of frames its own counter does
	// not see.
	counted     *atomic.Uint64
	broadcaster *broadcaster // for broadcast runs
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
	ns, send := w.cfg.NS, func() error { return w.liveLoop(ctx) }
	switch w.method {
	case Broadcast:
		ns, send = w.broadcaster.loop.ns, func() error { return w.broadcastLoop(ctx) }
	case Packet:
		send = func() error { return w.packetLoop(ctx) }
	}
	if ns.IsOpen() {
		return vethns.InNamespace(ns, send)
	}
	return send()
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
