package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"time"

	"github.com/cilium/ebpf/link"
	"github.com/prometheus/procfs"
	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/collector"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// Scenario is what the DUT does with the frames it receives.
type Scenario string

// The paper's scenarios, plus two without XDP: the Linux baseline, frames
// dropped by iptables in the raw table (`iptables -t raw -j DROP`) as the
// benchmark notes did, and the whole receive path, frames delivered to the DUT's UDP
// port 9, where no socket listens, and dropped there.
const (
	Drop     Scenario = "drop"
	Pass     Scenario = "pass"
	TX       Scenario = "tx"
	Redirect Scenario = "redirect"
	Linux    Scenario = "linux"
	NoSocket Scenario = "nosocket"
)

// Scenarios lists every scenario in display order.
var Scenarios = []Scenario{Drop, Pass, TX, Redirect, Linux, NoSocket}

// ParseScenario validates a scenario name.
func ParseScenario(s string) (Scenario, error) {
	for _, sc := range Scenarios {
		if string(sc) == s {
			return sc, nil
		}
	}
	return "", fmt.Errorf("unknown scenario %q (want one of drop, pass, tx, redirect, linux, nosocket)", s)
}

// AttachFunc attaches the DUT's XDP program for an XDP scenario to DUT
// (redirecting to Egress for Redirect) and returns what detaches it. The
// lab command passes the exporter's own rxq program, so the lab measures the
// code users run.
type AttachFunc func(sc Scenario) (io.Closer, error)

// AttachRxq attaches the exporter's own rxq program in the scenario's
// action, so the lab measures the program users run.
func (lb Lab) AttachRxq(sc Scenario) (io.Closer, error) {
	cfg := collector.RxqConfig{Devices: []string{lb.DUT}, Action: string(sc)}
	if sc == Redirect {
		cfg.RedirectDevice = lb.Egress
	}
	return collector.NewRxqCollector(cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// RunConfig describes one run.
type RunConfig struct {
	Scenario Scenario
	Queues   int           // RX queues used = generator CPUs 0..Queues-1
	Size     int           // frame size without FCS; 60 = 64-byte frames
	Rate     float64       // offered frames/s in total; 0 = as fast as possible
	Duration time.Duration // 0 with Count > 0 = until Count is sent
	Count    uint64        // frames to send; 0 = for Duration
	Attach   AttachFunc    // nil: the exporter's rxq collector attached it already
	Progress io.Writer     // one line per second; nil for none
	// Method forces the generator's method; empty: the fastest the
	// kernel allows.
	Method trafficgen.Method
}

// Result is what one run measured.
type Result struct {
	Scenario Scenario
	Queues   int
	Size     int
	Offered  float64 // frames/s asked for; 0 = max
	Sent     uint64  // frames the generator handed to the kernel
	Received uint64  // frames the DUT received (veth's own counters)
	Elapsed  time.Duration
	SoftPct  float64 // mean %soft over the RX CPUs
	IdlePct  float64 // mean %idle over the RX CPUs
	// Method is the generator's method and why it was taken.
	Method trafficgen.Choice
}

// SentPPS is the achieved send rate.
func (r Result) SentPPS() float64 { return float64(r.Sent) / r.Elapsed.Seconds() }

// RxPPS is the achieved receive rate.
func (r Result) RxPPS() float64 { return float64(r.Received) / r.Elapsed.Seconds() }

// Run drives one scenario on a lab that is up.
func (lb Lab) Run(ctx context.Context, cfg RunConfig) (Result, error) {
	res := Result{Scenario: cfg.Scenario, Queues: cfg.Queues, Size: cfg.Size, Offered: cfg.Rate}
	if cfg.Count == 0 && cfg.Duration <= 0 {
		return res, errors.New("a run needs a duration or a frame count")
	}
	ends, err := lb.ends()
	if err != nil {
		return res, err
	}
	defer ends.ns.Close()
	et, err := ethtool.NewEthtool()
	if err != nil {
		return res, err
	}
	defer et.Close()
	if ch, err := et.GetChannels(lb.DUT); err == nil && cfg.Queues > int(ch.MaxCombined+ch.MaxRx) && ch.MaxRx+ch.MaxCombined > 0 {
		return res, fmt.Errorf("--queues %d: %s has %d RX queues", cfg.Queues, lb.DUT, ch.MaxRx+ch.MaxCombined)
	}

	closers, err := lb.prepare(cfg, ends.ns, et)
	defer func() {
		for i := len(closers) - 1; i >= 0; i-- {
			_ = closers[i].Close()
		}
	}()
	if err != nil {
		return res, err
	}
	return lb.measure(ctx, cfg, ends, res)
}

// SlowWarning is what the lab says of a run whose generator is too slow
// for the program under test to be the bottleneck.
const SlowWarning = "AF_PACKET sends about 0.4 Mpps, one sendto(2) a frame: counts are exact, but rates are the sender's, not XDP's"

// labEnds are the two ends of a lab that is up: the device under test,
// and the generator's end in its namespace.
type labEnds struct {
	dut, gen *net.Interface
	ns       netns.NsHandle
}

func (lb Lab) ends() (labEnds, error) {
	var e labEnds
	var err error
	if e.dut, err = net.InterfaceByName(lb.DUT); err != nil {
		return e, fmt.Errorf("lab is not up (run `xdp-lab up`): %w", err)
	}
	if e.ns, err = netns.GetFromName(lb.Namespace); err != nil {
		return e, fmt.Errorf("lab namespace %s missing (run `xdp-lab up`): %w", lb.Namespace, err)
	}
	if err := vethns.InNamespace(e.ns, func() (err error) {
		e.gen, err = net.InterfaceByName(lb.Gen)
		return err
	}); err != nil {
		e.ns.Close()
		return e, fmt.Errorf("lab generator end %s: %w", lb.Gen, err)
	}
	return e, nil
}

// measure sends the run's frames and measures what the DUT received and
// the CPUs' softirq and idle time meanwhile.
func (lb Lab) measure(ctx context.Context, cfg RunConfig, ends labEnds, res Result) (Result, error) {
	g, err := trafficgen.New()
	if err != nil {
		return res, err
	}
	defer g.Close()
	if res.Method, err = g.Choose(cfg.Method); err != nil {
		return res, err
	}
	if cfg.Progress != nil {
		fmt.Fprintf(cfg.Progress, "generator: %s\n", res.Method)
		if res.Method.Slow() {
			fmt.Fprintf(cfg.Progress, "generator: %s\n", SlowWarning)
		}
	}
	cpus := make([]int, cfg.Queues)
	for i := range cpus {
		cpus[i] = i
	}
	rxBefore, err := lb.received()
	if err != nil {
		return res, err
	}
	cpuBefore, err := cpuTimes(cpus)
	if err != nil {
		return res, err
	}
	runCtx, cancel := ctx, context.CancelFunc(func() {})
	if cfg.Duration > 0 {
		runCtx, cancel = context.WithTimeout(ctx, cfg.Duration)
	}
	defer cancel()

	start := time.Now()
	done := make(chan error, 1)
	var sent uint64
	go func() {
		var err error
		pair := lb.Links()[0]
		sent, err = g.Run(runCtx, trafficgen.Config{
			NS: ends.ns, Ifindex: ends.gen.Index, SrcMAC: ends.gen.HardwareAddr, DstMAC: ends.dut.HardwareAddr,
			SrcIP: pair.PeerAddr.IP, DstIP: pair.HostAddr.IP,
			Size: cfg.Size, Count: cfg.Count, Rate: cfg.Rate, CPUs: cpus, Method: res.Method.Method,
			// At the maximum rate a slow scenario (pass, linux) loses
			// frames at the DUT's ring: what it received is the figure.
			MayLose: true,
		})
		done <- err
	}()
	if err := lb.progress(cfg, g, cpus, done); err != nil {
		return res, err
	}
	res.Elapsed = time.Since(start)
	res.Sent = sent
	// Let NAPI drain what is still in flight on the veth rings.
	time.Sleep(50 * time.Millisecond)
	rxAfter, err := lb.received()
	if err != nil {
		return res, err
	}
	res.Received = rxAfter - rxBefore
	cpuAfter, err := cpuTimes(cpus)
	if err != nil {
		return res, err
	}
	res.SoftPct, res.IdlePct = cpuAfter.sub(cpuBefore)
	return res, nil
}

// progress prints a line per second until the generator finishes.
func (lb Lab) progress(cfg RunConfig, g *trafficgen.Generator, cpus []int, done <-chan error) error {
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	lastSent, _ := g.Sent()
	lastRx, _ := lb.received()
	lastCPU, _ := cpuTimes(cpus)
	for {
		select {
		case err := <-done:
			return err
		case <-tick.C:
			if cfg.Progress == nil {
				continue
			}
			s, _ := g.Sent()
			rx, _ := lb.received()
			c, _ := cpuTimes(cpus)
			soft, idle := c.sub(lastCPU)
			fmt.Fprintf(cfg.Progress, "%-8s sent %12s pps  received %12s pps  RX CPUs %%soft %5.1f %%idle %5.1f\n",
				cfg.Scenario, human(float64(s-lastSent)), human(float64(rx-lastRx)), soft, idle)
			lastSent, lastRx, lastCPU = s, rx, c
		}
	}
}

// prepare sets the DUT up for the scenario: the DUT program, the sinks that
// let veth deliver frames into the namespace, and the iptables rule of the
// Linux baseline.
func (lb Lab) prepare(cfg RunConfig, ns netns.NsHandle, et *ethtool.Ethtool) ([]io.Closer, error) {
	var closers []io.Closer
	if cfg.Scenario == Linux || cfg.Scenario == NoSocket {
		// Without XDP, veth only runs NAPI (and so accepts XDP frames from
		// its peer) with GRO on.
		if err := et.Change(lb.DUT, map[string]bool{"rx-gro": true}); err != nil {
			return closers, fmt.Errorf("enabling GRO on %s: %w", lb.DUT, err)
		}
		closers = append(closers, closerFunc(func() error { return et.Change(lb.DUT, map[string]bool{"rx-gro": false}) }))
		if cfg.Scenario == NoSocket {
			return closers, nil
		}
		rule, err := lb.addRawDrop()
		if err != nil {
			return closers, err
		}
		return append(closers, rule), nil
	}
	if cfg.Attach == nil {
		// The exporter attached its rxq program itself; without any program
		// veth would not run NAPI and every frame would be dropped unseen.
		l, err := netlink.LinkByName(lb.DUT)
		if err != nil {
			return closers, err
		}
		if x := l.Attrs().Xdp; x == nil || !x.Attached {
			return closers, fmt.Errorf("no XDP program on %s: start the exporter with --collector.rxq.device=%s --collector.rxq.action=%s, or let xdp-lab attach one", lb.DUT, lb.DUT, cfg.Scenario)
		}
	} else {
		c, err := cfg.Attach(cfg.Scenario)
		if err != nil {
			return closers, fmt.Errorf("attaching the DUT program to %s: %w", lb.DUT, err)
		}
		closers = append(closers, c)
	}
	var sinks []string
	switch cfg.Scenario {
	case TX:
		sinks = []string{lb.Gen}
	case Redirect:
		sinks = []string{lb.Sink}
	}
	for _, dev := range sinks {
		s, err := attachSink(ns, dev)
		if err != nil {
			return closers, err
		}
		closers = append(closers, s)
	}
	return closers, nil
}

type closerFunc func() error

func (f closerFunc) Close() error { return f() }

// attachSink attaches an XDP_DROP program to a device inside the lab
// namespace: veth delivers XDP frames to a peer only when the peer runs NAPI.
func attachSink(ns netns.NsHandle, dev string) (io.Closer, error) {
	prog, err := xdptest.Verdict("xdp_lab_sink", xdptest.Drop)
	if err != nil {
		return nil, fmt.Errorf("the sink program: %w", err)
	}
	var l link.Link
	err = vethns.InNamespace(ns, func() error {
		ifc, err := net.InterfaceByName(dev)
		if err != nil {
			return err
		}
		l, err = link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index})
		return err
	})
	prog.Close() // the link holds its own reference
	if err != nil {
		return nil, fmt.Errorf("attaching the sink to %s: %w", dev, err)
	}
	return l, nil
}

// received is the DUT's RX packet counter (rtnl_link_stats64): veth
// counts every frame it takes from its peer there, XDP or not.
func (lb Lab) received() (uint64, error) {
	l, err := netlink.LinkByName(lb.DUT)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", lb.DUT, err)
	}
	return l.Attrs().Statistics.RxPackets, nil
}

type cpuSample struct{ soft, idle, total float64 }

func cpuTimes(cpus []int) (cpuSample, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return cpuSample{}, err
	}
	st, err := fs.Stat()
	if err != nil {
		return cpuSample{}, err
	}
	var s cpuSample
	for _, c := range cpus {
		t, ok := st.CPU[int64(c)]
		if !ok {
			return s, fmt.Errorf("CPU %d not in /proc/stat", c)
		}
		s.soft += t.SoftIRQ
		s.idle += t.Idle + t.Iowait
		s.total += t.User + t.Nice + t.System + t.Idle + t.Iowait + t.IRQ + t.SoftIRQ + t.Steal
	}
	return s, nil
}

// sub returns %soft and %idle between two samples.
func (s cpuSample) sub(before cpuSample) (soft, idle float64) {
	total := s.total - before.total
	if total <= 0 {
		return 0, 0
	}
	return 100 * (s.soft - before.soft) / total, 100 * (s.idle - before.idle) / total
}

// human formats a rate with thousands separators, as xdp_rxq_info does.
func human(v float64) string {
	s := fmt.Sprintf("%.0f", v)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}
