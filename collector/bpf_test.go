package collector

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/bpfprog"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/tcprog"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// testProg is an XDP_DROP program loaded for one test.
type testProg struct {
	prog *ebpf.Program
	id   string
	name string
	tag  string
}

func loadDrop(t testing.TB, name string) testProg {
	t.Helper()
	return describe(t, vethtest.Verdict(t, name, xdptest.Drop))
}

func loadPass(t testing.TB, name string) testProg {
	t.Helper()
	return describe(t, vethtest.Verdict(t, name, xdptest.Pass))
}

func describe(t testing.TB, prog *ebpf.Program) testProg {
	t.Helper()
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("kernel reports no program id")
	}
	return testProg{prog: prog, id: strconv.FormatUint(uint64(id), 10), name: info.Name, tag: info.Tag}
}

func attachXDP(t *testing.T, p testProg, ifindex int, flags link.XDPAttachFlags) string {
	t.Helper()
	l, err := link.AttachXDP(link.XDPOptions{Program: p.prog, Interface: ifindex, Flags: flags})
	testenv.Check(t, err, "attaching XDP")
	t.Cleanup(func() { l.Close() })
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	return strconv.FormatUint(uint64(info.ID), 10)
}

func newBPF(t *testing.T, cfg BPFConfig) *bpfCollector {
	t.Helper()
	c, err := newBPFCollector(cfg, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "building the bpf collector")
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// sendPacketSocket writes n frames out of the pair's peer through an
// AF_PACKET socket. Unlike live frames, this path needs no XDP program on
// the receiving end, so frames reach generic XDP through the stack.
func sendPacketSocket(t *testing.T, pair *vethns.Pair, n int) {
	t.Helper()
	err := pair.Do(func() error {
		fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW, 0) // protocol 0: send only
		if err != nil {
			return err
		}
		defer unix.Close(fd)
		to := &unix.SockaddrLinklayer{Ifindex: pair.Peer.Index, Halen: 6}
		copy(to.Addr[:], pair.Host.HardwareAddr)
		frame := trafficgen.Frame(pair.Peer.HardwareAddr, pair.Host.HardwareAddr, nil, nil, 1024, trafficgen.MinFrameSize)
		for range n {
			if err := unix.Sendto(fd, frame, 0, to); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("sending through a packet socket: %v", err)
	}
}

// TestBPFAttachedPrograms attaches one program in native mode and one in
// generic mode, sends a known number of frames to each, and checks that the
// collector finds both with their id, name, tag, mode and link, and that
// with --collector.bpf.enable-stats each run count equals the frames sent.
func TestBPFAttachedPrograms(t *testing.T) {
	native, generic := vethtest.Pair(t, 2), vethtest.Pair(t, 1)
	pn, pg := loadDrop(t, "xdpt_native"), loadDrop(t, "xdpt_generic")
	linkN := attachXDP(t, pn, native.Host.Index, 0)
	linkG := attachXDP(t, pg, generic.Host.Index, link.XDPGenericMode)

	c := newBPF(t, BPFConfig{EnableStats: true})

	const nNative, nGeneric = 100_000, 1_000
	vethtest.SendExactly(t, native, nNative)
	sendPacketSocket(t, generic, nGeneric)

	mfs := gather(t, c)
	for _, tc := range []struct {
		pair      *vethns.Pair
		p         testProg
		mode, lid string
		runs      float64
	}{
		{native, pn, "native", linkN, nNative},
		{generic, pg, "generic", linkG, nGeneric},
	} {
		if n := len(mfs.Series("xdp_bpf_prog_info", "device", tc.pair.Host.Name)); n != 1 {
			t.Errorf("%s: %d programs reported, want 1", tc.pair.Host.Name, n)
		}
		mfs.Value(t, "xdp_bpf_prog_info", "device", tc.pair.Host.Name, "attach_mode", tc.mode,
			"prog_id", tc.p.id, "name", tc.p.name, "tag", tc.p.tag, "link_id", tc.lid)
		if got := mfs.Value(t, "xdp_bpf_prog_runs_total", "prog_id", tc.p.id, "name", tc.p.name); got != tc.runs {
			t.Errorf("%s (%s): run count %v, want the %v frames sent", tc.p.name, tc.mode, got, tc.runs)
		}
		if got := mfs.Value(t, "xdp_bpf_prog_run_seconds_total", "prog_id", tc.p.id); got <= 0 {
			t.Errorf("%s: run time %v, want > 0 with stats enabled", tc.p.name, got)
		}
	}
	// The generator's own program ran nNative times too, but it is not
	// attached to any device.
	if n := len(mfs.Series("xdp_bpf_prog_info", "name", "xdp_trafficgen")); n != 0 {
		t.Errorf("the generator's unattached program is reported %d times", n)
	}
	if got := mfs.Value(t, "xdp_bpf_stats_enabled", "source", "exporter"); got != 1 {
		t.Errorf(`xdp_bpf_stats_enabled{source="exporter"} = %v with enable-stats, want 1`, got)
	}
}

// TestBPFTCPrograms puts programs on a veth's tc hooks (a filter under
// clsact on ingress and on egress) and, where the kernel has tcx as the
// exporter probes it, one on tcx ingress, sends frames through a packet
// socket that generic XDP passes to the stack, and checks each program's
// info series and that with --collector.bpf.enable-stats the XDP and
// ingress programs ran once per frame.
func TestBPFTCPrograms(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	xdp := loadPass(t, "xdpt_tc_pass")
	attachXDP(t, xdp, pair.Host.Index, link.XDPGenericMode)
	in, out, tcx := tcProg(t, "xdpt_tc_in"), tcProg(t, "xdpt_tc_out"), tcProg(t, "xdpt_tcx_in")
	vethtest.AttachTC(t, pair.Host.Index, "ingress", 1, in.prog)
	vethtest.AttachTC(t, pair.Host.Index, "egress", 1, out.prog)
	hasTCX := tcprog.ProbeTCX() == nil
	tcxLink := ""
	if hasTCX {
		l, err := link.AttachTCX(link.TCXOptions{Interface: pair.Host.Index, Program: tcx.prog, Attach: ebpf.AttachTCXIngress})
		testenv.Check(t, err, "attaching tcx ingress")
		t.Cleanup(func() { l.Close() })
		info, err := l.Info()
		if err != nil {
			t.Fatal(err)
		}
		tcxLink = strconv.FormatUint(uint64(info.ID), 10)
	}
	c := newBPF(t, BPFConfig{EnableStats: true})

	const n = 1_000
	sendPacketSocket(t, pair, n)
	mfs := gather(t, c)
	dev := pair.Host.Name
	mfs.Value(t, "xdp_bpf_tc_prog_info", "device", dev, "kind", "tc", "hook", "ingress", "order", "0",
		"prog_id", in.id, "name", in.name, "tag", in.tag, "link_id", "")
	mfs.Value(t, "xdp_bpf_tc_prog_info", "device", dev, "kind", "tc", "hook", "egress", "order", "0",
		"prog_id", out.id, "name", out.name, "tag", out.tag, "link_id", "")
	runs := map[testProg]float64{xdp: n, in: n}
	want := 2
	if hasTCX {
		mfs.Value(t, "xdp_bpf_tc_prog_info", "device", dev, "kind", "tcx", "hook", "ingress", "order", "0",
			"prog_id", tcx.id, "name", tcx.name, "tag", tcx.tag, "link_id", tcxLink)
		runs[tcx] = n
		want++
	}
	if got := len(mfs.Series("xdp_bpf_tc_prog_info", "device", dev)); got != want {
		t.Errorf("%s: %d tc programs reported, want %d", dev, got, want)
	}
	for p, want := range runs {
		if got := mfs.Value(t, "xdp_bpf_prog_runs_total", "prog_id", p.id, "name", p.name); got != want {
			t.Errorf("%s: run count %v, want the %v frames sent", p.name, got, want)
		}
	}
}

// tcProg is a sched_cls program loaded for one test.
func tcProg(t *testing.T, name string) testProg {
	t.Helper()
	return describe(t, vethtest.TCProgram(t, name))
}

// TestBPFLegacyAttach checks that a program attached through netlink
// without a bpf_link is found, with an empty link_id.
func TestBPFLegacyAttach(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	p := loadDrop(t, "xdpt_legacy")
	l, err := netlink.LinkByIndex(pair.Host.Index)
	if err != nil {
		t.Fatal(err)
	}
	err = netlink.LinkSetXdpFdWithFlags(l, p.prog.FD(), int(link.XDPGenericMode))
	testenv.Check(t, err, "attaching XDP through netlink")
	c := newBPF(t, BPFConfig{})
	mfs := gather(t, c)
	mfs.Value(t, "xdp_bpf_prog_info", "device", pair.Host.Name, "attach_mode", "generic",
		"prog_id", p.id, "name", p.name, "link_id", "")
}

// TestBPFStatsEnabled checks both sources of xdp_bpf_stats_enabled: the
// sysctl as the kernel reports it (and, through a fake procfs, both of its
// values) and the exporter's own BPF_ENABLE_STATS fd, which Close releases.
func TestBPFStatsEnabled(t *testing.T) {
	testenv.Privileged(t)
	raw, err := os.ReadFile("/proc/sys/kernel/bpf_stats_enabled")
	if err != nil {
		testenv.Unavailable(t, "kernel without BPF statistics: %v", err)
	}
	want, err := strconv.ParseFloat(strings.TrimSpace(string(raw)), 64)
	if err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, newBPF(t, BPFConfig{}))
	if got := mfs.Value(t, "xdp_bpf_stats_enabled", "source", "sysctl"); got != want {
		t.Errorf(`sysctl gauge = %v, /proc/sys/kernel/bpf_stats_enabled = %v`, got, want)
	}
	if got := mfs.Value(t, "xdp_bpf_stats_enabled", "source", "exporter"); got != 0 {
		t.Errorf(`exporter gauge = %v without enable-stats, want 0`, got)
	}

	proc := t.TempDir()
	if err := os.MkdirAll(filepath.Join(proc, "sys/kernel"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, sysctl := range []string{"0", "1"} {
		if err := os.WriteFile(filepath.Join(proc, "sys/kernel/bpf_stats_enabled"), []byte(sysctl+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		mfs := gather(t, newBPF(t, BPFConfig{ProcFS: proc}))
		if got := mfs.Value(t, "xdp_bpf_stats_enabled", "source", "sysctl"); strconv.FormatFloat(got, 'f', -1, 64) != sysctl {
			t.Errorf("sysctl %s: gauge = %v", sysctl, got)
		}
	}

	fds := countFDs(t)
	on := newBPF(t, BPFConfig{ProcFS: proc, EnableStats: true})
	if got := gather(t, on).Value(t, "xdp_bpf_stats_enabled", "source", "exporter"); got != 1 {
		t.Errorf("exporter gauge = %v with enable-stats, want 1", got)
	}
	if got := countFDs(t); got != fds+1 {
		t.Errorf("enable-stats holds %d fds, want 1", got-fds)
	}
	if err := on.Close(); err != nil {
		t.Fatal(err)
	}
	if got := gather(t, on).Value(t, "xdp_bpf_stats_enabled", "source", "exporter"); got != 0 {
		t.Errorf("exporter gauge = %v after Close, want 0", got)
	}
	if got := countFDs(t); got != fds {
		t.Errorf("Close left %d fds open", got-fds)
	}
}

func countFDs(t *testing.T) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// drain runs one Update and discards its metrics.
func drain(t testing.TB, c Collector) {
	t.Helper()
	ch := make(chan prometheus.Metric)
	done := make(chan struct{})
	go func() {
		for range ch {
		}
		close(done)
	}()
	err := c.Update(context.Background(), NewLinkSnapshot(), ch)
	close(ch)
	<-done
	if err != nil {
		t.Fatal(err)
	}
}

// TestBPFNoFDLeak scrapes many times with programs attached (through a
// link and without one) and checks that the process holds no more fds
// afterwards than before.
func TestBPFNoFDLeak(t *testing.T) {
	a, b := vethtest.Pair(t, 1), vethtest.Pair(t, 1)
	attachXDP(t, loadDrop(t, "xdpt_leak_link"), a.Host.Index, 0)
	p := loadDrop(t, "xdpt_leak_nl")
	l, err := netlink.LinkByIndex(b.Host.Index)
	if err != nil {
		t.Fatal(err)
	}
	testenv.Check(t, netlink.LinkSetXdpFd(l, p.prog.FD()), "attaching XDP through netlink")
	c := newBPF(t, BPFConfig{EnableStats: true})
	drain(t, c) // lets the runtime open whatever it opens once
	before := countFDs(t)
	for range 500 {
		drain(t, c)
	}
	if after := countFDs(t); after != before {
		t.Fatalf("%d fds before 500 scrapes, %d after", before, after)
	}
}

// TestBPFDetachedSkipped lists a real XDP attachment and a real tc
// filter, then detaches and unloads both programs before the collector
// reads them, as happens when a program is replaced during a scrape: they
// are skipped without an error.
func TestBPFDetachedSkipped(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	prog, err := xdptest.Verdict("xdpt_gone", xdptest.Pass)
	testenv.Check(t, err, "loading an XDP program")
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: pair.Host.Index})
	testenv.Check(t, err, "attaching XDP")
	filter, err := xdptest.TC("xdpt_tc_gone")
	testenv.Check(t, err, "loading a sched_cls program")
	vethtest.AttachTC(t, pair.Host.Index, "ingress", 1, filter)
	c := newBPF(t, BPFConfig{})

	devs, err := dumpLinks()
	if err != nil {
		t.Fatal(err)
	}
	d, _ := devs.Get(uint32(pair.Host.Index))
	mine := d.XDP
	if len(mine) != 1 || mine[0].mode != "native" {
		t.Fatalf("listing found %+v on %s, want one native program", mine, pair.Host.Name)
	}
	links, err := bpfprog.XDPLinks()
	if err != nil {
		t.Fatal(err)
	}
	tc, err := c.tcAttachments([]Link{d})
	if err != nil || len(tc) != 1 {
		t.Fatalf("listing found %+v (%v) on the tc hooks of %s, want one filter", tc, err, pair.Host.Name)
	}
	l.Close()
	prog.Close()
	if err := netlink.FilterDel(&netlink.BpfFilter{FilterAttrs: netlink.FilterAttrs{LinkIndex: pair.Host.Index, Parent: netlink.HANDLE_MIN_INGRESS, Priority: 1, Protocol: unix.ETH_P_ALL}}); err != nil {
		t.Fatal(err)
	}
	filter.Close()
	// cls_bpf puts its program after an RCU grace period, from a work
	// queue: wait until the id is gone, as it is for a later scrape.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		p, err := ebpf.NewProgramFromID(tc[0].Prog)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err == nil {
			p.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d of the deleted filter still exists after 5 s (%v)", tc[0].Prog, err)
		}
	}

	ch := make(chan prometheus.Metric, 16)
	if err := c.emit(context.Background(), ch, devs, mine, links, tc); err != nil {
		t.Fatalf("a program detached during the scrape is an error: %v", err)
	}
	close(ch)
	for m := range ch {
		t.Errorf("metric for a detached program: %v", m.Desc())
	}
}

// TestBPFNetkit makes a netkit pair, where the kernel has netkit as the
// exporter probes it, with a program on each side attached through the
// primary: both are listed on the primary, by direction, and none on the
// peer, which the collector finds by its kind.
func TestBPFNetkit(t *testing.T) {
	testenv.Privileged(t)
	if err := tcprog.ProbeNetkit(); errors.Is(err, errors.ErrUnsupported) {
		// tcprog's TestNetkit checks that the kernel agrees.
		t.Logf("this kernel has no netkit: %v", err)
		return
	} else if err != nil {
		t.Fatal(err)
	}
	id := vethns.UniqueID()
	nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: "nk" + id + "p"}, Mode: netlink.NETKIT_MODE_L2}
	nk.SetPeerAttrs(&netlink.LinkAttrs{Name: "nk" + id + "q"})
	testenv.Check(t, netlink.LinkAdd(nk), "making a netkit pair")
	t.Cleanup(func() { _ = netlink.LinkDel(nk) })
	primary, err := netlink.LinkByName(nk.Name)
	if err != nil {
		t.Fatal(err)
	}
	progs := map[string]testProg{"primary": tcProg(t, "xdpt_nk_primary"), "peer": tcProg(t, "xdpt_nk_peer")}
	for dir, at := range map[string]ebpf.AttachType{"primary": ebpf.AttachNetkitPrimary, "peer": ebpf.AttachNetkitPeer} {
		l, err := link.AttachNetkit(link.NetkitOptions{Interface: primary.Attrs().Index, Program: progs[dir].prog, Attach: at})
		testenv.Check(t, err, "attaching a netkit program")
		t.Cleanup(func() { l.Close() })
	}
	mfs := gather(t, newBPF(t, BPFConfig{}))
	for dir, p := range progs {
		mfs.Value(t, "xdp_bpf_tc_prog_info", "device", nk.Name, "kind", "netkit", "hook", dir, "order", "0",
			"prog_id", p.id, "name", p.name, "tag", p.tag)
	}
	if got := mfs.Series("xdp_bpf_tc_prog_info", "device", "nk"+id+"q"); len(got) != 0 {
		t.Errorf("the peer lists programs: %v", got)
	}
}
