package trafficgen

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// The broadcast method, for kernels that refuse live frames. A veth pair
// in a namespace of the generator's own carries one frame around a loop:
// xdp_bounce on the loop's first end sends every frame back (XDP_TX);
// xdp_fan on the second broadcasts each lap through the fan devmap, entry
// 0 back into the loop, entries 1..fanCopies out of the run's device,
// whose devmap program (xdp_fan_out) lets a copy go only while the CPU's
// target is not reached. Everything after the seed frame runs in the
// kernel's NAPI loop on the worker's CPU: veth hands an XDP frame to the
// peer's queue of the sending CPU and schedules its NAPI there.
//
// One lap sends fanCopies frames, NAPI's weight (64), so a lap fills one
// poll of the receiving queue and the receiver drains what a lap sends
// before the next: the 256-frame ring of veth never fills, whatever the
// program under test costs.
const fanCopies = 64 // FAN_COPIES in trafficgen.c

const (
	// tick is how often a worker reads its CPU's counter and raises its
	// target.
	tick = time.Millisecond
	// reseedAfter: a loop whose counter has not moved for this long lost
	// its frame (the ring it was on was full) or cannot send (the
	// receiver has no XDP program or GRO, so veth takes nothing); it is
	// stopped and gets a new frame.
	reseedAfter = 20 * time.Millisecond
	// stallLimit: a run with a count whose loop sends nothing for this
	// long, new frames and all, fails. A run until ctx ends keeps trying,
	// as a receiver may come back (an exporter restarting attaches its
	// program again).
	stallLimit = 5 * time.Second
	// drainWait bounds the wait for the receiver's counter to show the
	// last frames sent. Little is needed: a frame is counted in the same
	// flush that hands it to the receiver, and a run's workers end after
	// their CPUs' last flush; it is short so that a run that lost frames
	// does not end late.
	drainWait = 100 * time.Millisecond
)

// devmapVal mirrors struct bpf_devmap_val.
type devmapVal struct {
	Ifindex uint32
	ProgFD  int32 // -1: no program
}

// broadcaster is the process's broadcast loop, shared by its generators
// and used by one run at a time: its own programs and maps, the namespace
// and the veth pair. The kernel's NAPI, and the exporter's napi collector,
// then see two devices for the process, not two for every generator (a
// test process makes hundreds of generators, and a namespace gone with
// its generator left its devices' keys in the exporter's tables for their
// idle time). It lives until the process exits, which releases all of it.
type broadcaster struct {
	objs trafficgenObjects
	loop *loop
}

var shared struct {
	busy sync.Mutex // held by the run that uses bc
	mu   sync.Mutex // guards bc
	bc   *broadcaster
}

// takeBroadcaster returns the process's broadcaster, made on first use,
// for the caller's run alone until it calls release.
func takeBroadcaster() (*broadcaster, error) {
	shared.busy.Lock()
	shared.mu.Lock()
	defer shared.mu.Unlock()
	if shared.bc == nil {
		bc := &broadcaster{}
		if err := load(&bc.objs); err != nil {
			shared.busy.Unlock()
			return nil, err
		}
		l, err := newLoop(&bc.objs)
		if err != nil {
			bc.objs.Close()
			shared.busy.Unlock()
			return nil, err
		}
		bc.loop = l
		shared.bc = bc
	}
	return shared.bc, nil
}

func (bc *broadcaster) release() { shared.busy.Unlock() }

// loop is the broadcast method's veth loop.
type loop struct {
	ns    netns.NsHandle
	seed  int // the end seed frames are sent out of, inside ns
	links []link.Link
}

// The loop's devices, in a namespace of their own.
const (
	loopSeed = "tgen-loop0"
	loopFan  = "tgen-loop1"
)

// newLoop makes the loop in a new namespace, which lives as long as a
// handle to it is open: it has no name under /run/netns, so nothing else
// sees it or sends into it.
func newLoop(objs *trafficgenObjects) (l *loop, err error) {
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	name := "xdptg-" + vethns.UniqueID()
	ns, err := vethns.NewNamespace(name, true)
	if err != nil {
		return nil, err
	}
	if err := netns.DeleteNamed(name); err != nil {
		ns.Close()
		return nil, fmt.Errorf("unnaming netns %s: %w", name, err)
	}
	l = &loop{ns: ns}
	defer func() {
		if err != nil {
			err = errors.Join(err, l.Close())
			l = nil
		}
	}()
	err = vethns.InNamespace(ns, func() error {
		// One queue per CPU on both ends, so that each CPU's lap stays on
		// the queue of its own (veth picks the peer's queue by CPU).
		q := uint32(cpus)
		veth := &netlink.Veth{
			LinkAttrs:       netlink.LinkAttrs{Name: loopSeed, NumTxQueues: cpus, NumRxQueues: cpus},
			PeerName:        loopFan,
			PeerNumTxQueues: q,
			PeerNumRxQueues: q,
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("creating the broadcast loop's veth pair: %w", err)
		}
		ends := make([]*net.Interface, 2)
		for i, name := range []string{loopSeed, loopFan} {
			nl, err := netlink.LinkByName(name)
			if err != nil {
				return err
			}
			if err := netlink.LinkSetUp(nl); err != nil {
				return fmt.Errorf("bringing %s up: %w", name, err)
			}
			if ends[i], err = net.InterfaceByName(name); err != nil {
				return err
			}
		}
		for i, prog := range []*ebpf.Program{objs.XdpBounce, objs.XdpFan} {
			ln, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ends[i].Index})
			if err != nil {
				return fmt.Errorf("attaching the broadcast loop's XDP program to %s: %w", ends[i].Name, err)
			}
			l.links = append(l.links, ln)
		}
		l.seed = ends[0].Index
		if err := objs.Fan.Put(uint32(0), devmapVal{Ifindex: uint32(ends[1].Index), ProgFD: -1}); err != nil {
			return fmt.Errorf("setting the broadcast loop's lap entry: %w", err)
		}
		return nil
	})
	return l, err
}

// Close detaches the loop's programs and lets the namespace, and the
// devices with it, go.
func (l *loop) Close() error {
	var errs []error
	for _, ln := range l.links {
		errs = append(errs, ln.Close())
	}
	errs = append(errs, l.ns.Close())
	return errors.Join(errs...)
}

// aim points the fan's copies at the run's device, in the run's
// namespace, through xdp_fan_out.
func (bc *broadcaster) aim(cfg Config) error {
	set := func() error {
		for i := uint32(1); i <= fanCopies; i++ {
			v := devmapVal{Ifindex: uint32(cfg.Ifindex), ProgFD: int32(bc.objs.XdpFanOut.FD())}
			if err := bc.objs.Fan.Put(i, v); err != nil {
				return fmt.Errorf("pointing the broadcast at ifindex %d: %w", cfg.Ifindex, err)
			}
		}
		return nil
	}
	if cfg.NS.IsOpen() {
		return vethns.InNamespace(cfg.NS, set)
	}
	return set()
}

// xdpXmit returns how many XDP frames the device's peer took from it:
// veth's tx_queue_N_xdp_xmit summed over queues, the receiver's own count
// of frames handed to its XDP ring; false where the device shows no such
// counter (another driver, or a veth being torn down, whose stats leave
// out its peer's queues): such runs count what was handed to the kernel.
func xdpXmit(ns netns.NsHandle, ifindex int) (total uint64, found bool, err error) {
	read := func() error {
		dev, err := net.InterfaceByIndex(ifindex)
		if err != nil {
			return err
		}
		et, err := ethtool.NewEthtool()
		if err != nil {
			return err
		}
		defer et.Close()
		stats, err := et.Stats(dev.Name)
		if err != nil {
			return fmt.Errorf("ethtool statistics of %s: %w", dev.Name, err)
		}
		for k, v := range stats {
			if strings.HasPrefix(k, "tx_queue_") && strings.HasSuffix(k, "_xdp_xmit") {
				total += v
				found = true
			}
		}
		return nil
	}
	if ns.IsOpen() {
		err = vethns.InNamespace(ns, read)
	} else {
		err = read()
	}
	return total, found, err
}

// cpuLap is one CPU's share of a broadcast run: its counter and target
// in the broadcaster's maps, and what of its count the generator has.
type cpuLap struct {
	w        worker
	objs     *trafficgenObjects
	base     uint64 // the CPU's counter when the run started
	reported uint64 // the counter as last added to the generator's count
}

func (c *cpuLap) sent() (uint64, error) {
	var perCPU []uint64
	if err := c.objs.Sent.Lookup(uint32(0), &perCPU); err != nil {
		return 0, fmt.Errorf("reading the sent counter: %w", err)
	}
	return perCPU[c.w.cpu], nil
}

// report adds what the CPU sent since the last report to the generator's
// count.
func (c *cpuLap) report(n uint64) {
	c.w.counted.Add(n - c.reported)
	c.reported = n
}

func (c *cpuLap) setTarget(t uint64) error { return c.objs.FanTarget.Put(uint32(c.w.cpu), t) }

// due is the counter the CPU's lap may reach by now.
func (c *cpuLap) due() uint64 {
	w := c.w
	if w.rate > 0 {
		n := uint64(w.rate * time.Since(w.start).Seconds())
		if w.count > 0 {
			n = min(n, w.count)
		}
		return c.base + n
	}
	if w.count > 0 {
		return c.base + w.count
	}
	return math.MaxUint64
}

// broadcastLoop keeps the CPU's lap going until its share is sent or ctx
// ends, raising the CPU's target as pacing allows, and adds what the CPU
// sent to the generator's count as it goes.
func (w worker) broadcastLoop(ctx context.Context) (err error) {
	seed := w.broadcaster.loop.seed
	fd, err := packetSocket(seed)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	to := &unix.SockaddrLinklayer{Ifindex: seed}
	c := &cpuLap{w: w, objs: &w.broadcaster.objs}
	if c.base, err = c.sent(); err != nil {
		return err
	}
	c.reported = c.base
	defer func() {
		// A zero target stops the lap at its next copy; then the count
		// is final.
		stop := c.setTarget(0)
		n, readErr := c.sent()
		if readErr == nil {
			c.report(n)
		}
		err = errors.Join(err, stop, readErr)
	}()
	t := time.NewTicker(tick)
	defer t.Stop()
	var target, last uint64 = c.base, c.base
	lastMove, seeded := time.Now(), time.Time{}
	for {
		n, err := c.sent()
		if err != nil {
			return err
		}
		c.report(n)
		if w.count > 0 && n >= c.base+w.count {
			return nil
		}
		now := time.Now()
		ended := n >= target // the lap stopped itself at the old target
		if n != last {
			last, lastMove = n, now
		}
		if d := c.due(); d != target {
			if err := c.setTarget(d); err != nil {
				return fmt.Errorf("raising CPU %d's target: %w", w.cpu, err)
			}
			target = d
		}
		stalled := now.Sub(lastMove) > reseedAfter && now.Sub(seeded) > reseedAfter
		switch {
		case n < target && stalled:
			if w.count > 0 && now.Sub(lastMove) > stallLimit {
				return fmt.Errorf("broadcast loop on CPU %d: the receiver took no frame for %s (%d of %d sent; does it have an XDP program, or GRO on?)", w.cpu, stallLimit, n-c.base, w.count)
			}
			// Stop whatever still loops without sending, so that one
			// frame loops after the next seed, not one per seed.
			if err := c.setTarget(n); err != nil {
				return fmt.Errorf("stopping CPU %d's loop: %w", w.cpu, err)
			}
			target, seeded = n, now
		case n < target && ended:
			if err := unix.Sendto(fd, w.frame, 0, to); err != nil && !errors.Is(err, unix.ENOBUFS) {
				return fmt.Errorf("seeding the broadcast loop on CPU %d: %w", w.cpu, err)
			}
			seeded, lastMove = now, now
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}
