package collector

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdpmon"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// reapLab is the monitor and napi collectors behind one Set.
type reapLab struct {
	t    *testing.T
	set  *Set
	xdp  *xdpCollector
	napi *napiCollector
}

func newReapLab(t *testing.T) *reapLab {
	testenv.Privileged(t)
	xd, err := NewXDPCollector(XDPConfig{}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "monitor collector")
	np, err := loadNapiCollector(NapiConfig{}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "napi collector")
	l := &reapLab{t: t, set: NewSet(map[string]Collector{"monitor": xd, "napi": np}, slog.New(slog.DiscardHandler)), xdp: xd.(*xdpCollector), napi: np}
	t.Cleanup(func() { l.set.Close() })
	return l
}

// scrape gathers the set as the exporter serves it; every collector must
// succeed.
func (l *reapLab) scrape() exportertest.Families {
	l.t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(l.set.Scrape(context.Background()))
	mfs, err := reg.Gather()
	if err != nil {
		l.t.Fatalf("gather: %v", err)
	}
	out := exportertest.Families{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	for _, m := range out["xdp_scrape_collector_success"].GetMetric() {
		if m.GetGauge().GetValue() != 1 {
			l.t.Fatalf("collector %s failed", m.GetLabel()[0].GetValue())
		}
	}
	return out
}

// sizes counts the keys in the exceptions map and the claimed napi slots.
func (l *reapLab) sizes() (exceptions, napiSlots int) {
	l.t.Helper()
	var k xdpmon.XdpmonExceptionKey
	var v []uint64
	it := l.xdp.Maps[xdpmon.XdpmonMapExceptions].Iterate()
	for it.Next(&k, &v) {
		exceptions++
	}
	if err := it.Err(); err != nil {
		l.t.Fatal(err)
	}
	napiSlots, err := l.napi.ClaimedSlots()
	if err != nil {
		l.t.Fatal(err)
	}
	return exceptions, napiSlots
}

// churn runs cycles of step, spread over workers goroutines each with its
// own generator, and scrapes back to back until they are done, checking
// after each scrape that neither table holds more than bound keys.
func (l *reapLab) churn(phase string, cycles, workers, bound int, step func(g *trafficgen.Generator, worker, i int) error) {
	l.t.Helper()
	start := time.Now()
	var done atomic.Int64
	errs := make(chan error, workers)
	for w := range workers {
		go func() {
			g, err := trafficgen.New()
			if err == nil {
				defer g.Close()
				for i := w; i < cycles && err == nil; i += workers {
					err = step(g, w, i)
					done.Add(1)
				}
			}
			errs <- err
		}()
	}
	scrapes, most := 0, 0
	for finished := 0; finished < workers; {
		select {
		case err := <-errs:
			if err != nil {
				l.t.Fatalf("%s: %v", phase, err)
			}
			finished++
		default:
			l.scrape()
			scrapes++
			e, n := l.sizes()
			if e > bound || n > bound {
				l.t.Fatalf("%s, after %d cycles: %d exception keys and %d napi slots, want at most %d each", phase, done.Load(), e, n, bound)
			}
			most = max(most, e, n)
		}
	}
	l.t.Logf("%s: %d cycles in %v, %d scrapes, at most %d keys in a table", phase, cycles, time.Since(start).Round(time.Millisecond), scrapes, most)
}

// send makes peer send n frames to host, both in the test's namespace.
func send(g *trafficgen.Generator, peer, host *net.Interface, n uint64) error {
	sent, err := g.Run(context.Background(), trafficgen.Config{NS: netns.None(), Ifindex: peer.Index,
		SrcMAC: peer.HardwareAddr, DstMAC: host.HardwareAddr, Count: n, CPUs: []int{0}})
	if err == nil && sent != n {
		err = fmt.Errorf("sent %d of %d frames", sent, n)
	}
	return err
}

// abortProgram loads an XDP program that aborts every frame: each frame
// is an xdp:xdp_exception for its device and program.
func abortProgram() (*ebpf.Program, error) { return xdptest.Verdict("xdpt_abort", xdptest.Aborted) }

// vethPair makes a veth pair in the test's namespace, IPv6 off (no frames
// of the kernel's own), both ends up; del removes it.
func vethPair(host, peer string) (h, p *net.Interface, del func(), err error) {
	if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: host}, PeerName: peer}); err != nil {
		return nil, nil, nil, fmt.Errorf("creating veth %s: %w", host, err)
	}
	del = func() {
		if l, err := netlink.LinkByName(host); err == nil {
			_ = netlink.LinkDel(l)
		}
	}
	var ifs [2]*net.Interface
	for i, name := range []string{host, peer} {
		l, err := netlink.LinkByName(name)
		if err == nil {
			err = vethns.DisableIPv6(name)
		}
		if err == nil {
			err = netlink.LinkSetUp(l)
		}
		if err == nil {
			ifs[i], err = net.InterfaceByName(name)
		}
		if err != nil {
			del()
			return nil, nil, nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return ifs[0], ifs[1], del, nil
}

// checkFresh checks that a brand-new device and program, made after the
// churn, are counted exactly and nothing was counted as map full or
// untracked.
func (l *reapLab) checkFresh(id string) {
	l.t.Helper()
	fresh, err := abortProgram()
	testenv.Check(l.t, err, "loading an XDP program")
	defer fresh.Close()
	host, peer, del, err := vethPair("xr"+id+"new", "xr"+id+"gen")
	testenv.Check(l.t, err, "creating a veth pair")
	defer del()
	lk, err := link.AttachXDP(link.XDPOptions{Program: fresh, Interface: host.Index})
	testenv.Check(l.t, err, "attaching XDP")
	defer lk.Close()
	g, err := trafficgen.New()
	testenv.Check(l.t, err, "traffic generator")
	defer g.Close()
	const n = 1000
	if err := send(g, peer, host, n); err != nil {
		l.t.Fatal(err)
	}
	mfs := l.scrape()
	if v := mfs.Value(l.t, "xdp_monitor_exceptions_total", "device", host.Name, "action", "aborted"); v != n {
		l.t.Errorf("exceptions of the new program on the new device: %v, want %d", v, n)
	}
	var work float64
	for _, m := range mfs["xdp_napi_poll_work"].GetMetric() {
		if exportertest.Matches(m, "device", host.Name) {
			work += m.GetHistogram().GetSampleSum()
		}
	}
	if work != n {
		l.t.Errorf("napi work of the new device: %v, want %d", work, n)
	}
	if v := mfs.Value(l.t, "xdp_monitor_map_full_events_total", "map", "exceptions"); v != 0 {
		l.t.Errorf("%v exceptions counted as map full", v)
	}
	if v := mfs.Value(l.t, "xdp_napi_polls_untracked_total"); v != 0 {
		l.t.Errorf("%v napi polls untracked", v)
	}
}

// TestReapChurn replaces the XDP programs of 8 devices 2,000 times in all,
// then creates and deletes 2,000 veth pairs, with traffic on every program
// and device, scraping all along. The exceptions map (1,024 entries) and
// the napi slot table (128) would overflow without deletion; with it they
// stay small, nothing is counted as map full or untracked, and a device
// and program made afterwards are counted exactly.
func TestReapChurn(t *testing.T) {
	const cycles, workers, bound = 2000, 8, 100
	l := newReapLab(t)
	id := vethns.UniqueID()[:5]

	// A reload as load balancers do it: a new program swapped into the
	// device's bpf_link (BPF_LINK_UPDATE), the old one released.
	type dev struct {
		host, peer *net.Interface
		link       link.Link
		prog       *ebpf.Program
	}
	devs := make([]*dev, workers)
	for w := range devs {
		host, peer, del, err := vethPair(fmt.Sprintf("xr%sh%d", id, w), fmt.Sprintf("xr%sp%d", id, w))
		testenv.Check(t, err, "creating a veth pair")
		defer del()
		prog, err := abortProgram()
		testenv.Check(t, err, "loading an XDP program")
		lk, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: host.Index})
		testenv.Check(t, err, "attaching XDP")
		d := &dev{host: host, peer: peer, link: lk, prog: prog}
		defer func() { d.link.Close(); d.prog.Close() }()
		devs[w] = d
	}
	l.churn("program reloads", cycles, workers, bound, func(g *trafficgen.Generator, w, _ int) error {
		d := devs[w]
		prog, err := abortProgram()
		if err != nil {
			return err
		}
		if err := d.link.Update(prog); err != nil {
			prog.Close()
			return err
		}
		d.prog.Close()
		d.prog = prog
		return send(g, d.peer, d.host, 2)
	})
	// The device totals go on across the reloads: every exception of every
	// program that ran on the 8 devices, the gone ones' included.
	mfs := l.scrape()
	var total float64
	for _, d := range devs {
		v, _ := mfs.Sum("xdp_monitor_exceptions_total", "device", d.host.Name, "action", "aborted")
		total += v
	}
	if total != 2*cycles {
		t.Errorf("xdp_monitor_exceptions_total over the reloaded devices: %v, want %d (2 frames a reload)", total, 2*cycles)
	}

	prog, err := abortProgram()
	testenv.Check(t, err, "loading an XDP program")
	defer prog.Close()
	l.churn("veth churn", cycles, workers, bound, func(g *trafficgen.Generator, _, i int) error {
		host, peer, del, err := vethPair(fmt.Sprintf("xr%sh%x", id, i+workers), fmt.Sprintf("xr%sp%x", id, i+workers))
		if err != nil {
			return err
		}
		defer del()
		lk, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: host.Index})
		if err != nil {
			return err
		}
		defer lk.Close()
		return send(g, peer, host, 2)
	})

	l.checkFresh(id)
	e, s := l.sizes()
	t.Logf("after the churn: %d exception keys, %d napi slots", e, s)
}
