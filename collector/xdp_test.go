package collector

import (
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdpmon"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// xdpAttach attaches prog to ifindex in the calling thread's namespace
// (use pair.Do for the peer) and returns it.
func xdpAttach(t testing.TB, ifindex int, prog *ebpf.Program) *ebpf.Program {
	t.Helper()
	vethtest.AttachProgram(t, ifindex, prog)
	return prog
}

// xdpLoad loads an XDP program made of insns, closed when the test ends.
func xdpLoad(t testing.TB, insns asm.Instructions) *ebpf.Program {
	t.Helper()
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL", Instructions: insns})
	testenv.Check(t, err, "loading a test XDP program")
	t.Cleanup(func() { prog.Close() })
	return prog
}

// xdpRedirectProgram redirects every frame into slot 0 of m
// (xdptest.RedirectMap), closed when the test ends.
func xdpRedirectProgram(t testing.TB, m *ebpf.Map) *ebpf.Program {
	t.Helper()
	prog, err := xdptest.RedirectMap("xdpt_redirect", m)
	testenv.Check(t, err, "loading a redirect program")
	t.Cleanup(func() { prog.Close() })
	return prog
}

// xdpRedirectIfindex is bpf_redirect(ifindex, 0).
func xdpRedirectIfindex(ifindex int32) asm.Instructions {
	return asm.Instructions{
		asm.Mov.Imm(asm.R1, ifindex),
		asm.Mov.Imm(asm.R2, 0),
		asm.FnRedirect.Call(),
		asm.Return(),
	}
}

func xdpDevmapTo(t testing.TB, ifindex int) *ebpf.Map {
	t.Helper()
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.DevMap, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	testenv.Check(t, err, "creating a devmap")
	t.Cleanup(func() { m.Close() })
	if ifindex > 0 {
		if err := m.Put(uint32(0), uint32(ifindex)); err != nil {
			t.Fatalf("devmap slot 0 -> ifindex %d: %v", ifindex, err)
		}
	}
	return m
}

func newTestXDP(t testing.TB, cfg XDPConfig) Collector {
	t.Helper()
	testenv.Privileged(t)
	c, err := NewXDPCollector(cfg, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "starting the monitor collector")
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("closing the monitor collector: %v", err)
		}
	})
	return c
}

// TestXDPExceptions: a program returning XDP_ABORTED yields exactly one
// exception per frame, labelled with the device and ABORTED.
func TestXDPExceptions(t *testing.T) {
	c := newTestXDP(t, XDPConfig{})
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdictTo(t, pair.Host.Index, xdptest.Aborted)
	const n = 100_000
	vethtest.SendExactly(t, pair, n)

	mfs := gather(t, c)
	got := mfs.Value(t, "xdp_monitor_exceptions_total", "device", pair.Host.Name, "action", "aborted")
	if got != n {
		t.Fatalf("exceptions = %v, want %d", got, n)
	}
	if v := mfs.Value(t, "xdp_monitor_tracepoint_attached", "tracepoint", "xdp:xdp_exception"); v != 1 {
		t.Fatalf("xdp:xdp_exception attached = %v", v)
	}
}

// TestXDPRedirectErrors: redirects that the kernel refuses are counted by
// errno. A devmap slot whose device is down gives ENETDOWN; a device that
// cannot transmit XDP frames (a veth whose peer has no XDP program) gives
// EOPNOTSUPP; bpf_redirect to an ifindex that does not exist gives EINVAL.
// An empty devmap slot is not a redirect error: bpf_redirect_map returns
// XDP_ABORTED, which the kernel reports as an exception.
func TestXDPRedirectErrors(t *testing.T) {
	c := newTestXDP(t, XDPConfig{})
	const n = 10_000

	down := vethtest.Pair(t, 1)
	if err := down.Do(func() error { vethtest.AttachVerdictTo(t, down.Peer.Index, xdptest.Drop); return nil }); err != nil {
		t.Fatal(err)
	}
	l, err := netlink.LinkByName(down.Host.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetDown(l); err != nil {
		t.Fatal(err)
	}
	noXmit := vethtest.Pair(t, 1) // no XDP program on its peer

	for _, tc := range []struct {
		name   string
		prog   func(t *testing.T) *ebpf.Program
		family string
		labels []string
	}{
		{"device down", func(t *testing.T) *ebpf.Program { return xdpRedirectProgram(t, xdpDevmapTo(t, down.Host.Index)) },
			"xdp_monitor_redirect_errors_total", []string{"errno", "ENETDOWN"}},
		{"device without ndo_xdp_xmit", func(t *testing.T) *ebpf.Program { return xdpRedirectProgram(t, xdpDevmapTo(t, noXmit.Host.Index)) },
			"xdp_monitor_redirect_errors_total", []string{"errno", "EOPNOTSUPP"}},
		{"missing ifindex", func(t *testing.T) *ebpf.Program { return xdpLoad(t, xdpRedirectIfindex(0x7ffffff0)) },
			"xdp_monitor_redirect_errors_total", []string{"errno", "EINVAL"}},
		{"empty devmap slot", func(t *testing.T) *ebpf.Program { return xdpRedirectProgram(t, xdpDevmapTo(t, 0)) },
			"xdp_monitor_exceptions_total", []string{"action", "aborted"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := vethtest.Pair(t, 2)
			if tc.name == "device without ndo_xdp_xmit" && testenv.KernelBefore(t, 6, 3) {
				xdpAttach(t, pair.Host.Index, tc.prog(t))
				noXmitBefore63(t, pair, noXmit, n)
				return
			}
			xdpAttach(t, pair.Host.Index, tc.prog(t))
			vethtest.SendExactly(t, pair, n)
			mfs := gather(t, c)
			labels := append([]string{"device", pair.Host.Name}, tc.labels...)
			if got := mfs.Value(t, tc.family, labels...); got != n {
				t.Fatalf("%s%v = %v, want %d", tc.family, labels, got, n)
			}
			if tc.family == "xdp_monitor_redirect_errors_total" {
				if k := len(mfs.Series(tc.family, "device", pair.Host.Name)); k != 1 {
					t.Fatalf("%d redirect error series for %s, want only %v", k, pair.Host.Name, tc.labels)
				}
			}
		})
	}
}

// xdpRedirectLab makes the devmap redirect path: frames arrive on in.Host,
// whose program redirects them through a devmap to out.Host; out.Peer has
// an XDP_DROP program so veth accepts XDP frames for it.
func xdpRedirectLab(t *testing.T) (in, out *vethns.Pair) {
	in, out = vethtest.Pair(t, 2), vethtest.Pair(t, 2)
	if err := out.Do(func() error { vethtest.AttachVerdictTo(t, out.Peer.Index, xdptest.Drop); return nil }); err != nil {
		t.Fatal(err)
	}
	xdpAttach(t, in.Host.Index, xdpRedirectProgram(t, xdpDevmapTo(t, out.Host.Index)))
	return in, out
}

// TestXDPDevmapXmit: every redirected frame is sent by the devmap bulk
// transmit, and packets/bulks (xdp_monitor's bulk-average) lies between 1
// and the devmap bulk size, 16.
func TestXDPDevmapXmit(t *testing.T) {
	c := newTestXDP(t, XDPConfig{Xmit: true})
	in, out := xdpRedirectLab(t)
	const n = 100_000
	vethtest.SendExactly(t, in, n)

	mfs := gather(t, c)
	labels := []string{"from_device", in.Host.Name, "to_device", out.Host.Name}
	sent := mfs.Value(t, "xdp_monitor_devmap_xmit_packets_total", labels...)
	bulks := mfs.Value(t, "xdp_monitor_devmap_xmit_bulks_total", labels...)
	if sent != n {
		t.Fatalf("devmap xmit sent = %v, want %d", sent, n)
	}
	if d := mfs.Value(t, "xdp_monitor_devmap_xmit_drops_total", labels...); d != 0 {
		t.Fatalf("devmap xmit drops = %v, want 0", d)
	}
	if e := mfs.Value(t, "xdp_monitor_devmap_xmit_errors_total", labels...); e != 0 {
		t.Fatalf("devmap xmit errors = %v, want 0", e)
	}
	avg := sent / bulks
	t.Logf("bulk average %.2f (%v frames in %v bulks)", avg, sent, bulks)
	if avg < 1 || avg > 16 {
		t.Fatalf("bulk average %.2f outside [1, 16]", avg)
	}
	if _, ok := mfs["xdp_monitor_redirects_total"]; ok {
		t.Fatal("successful redirects counted without --collector.monitor.redirect-success")
	}
}

// TestXDPRedirectSuccess: with the opt-in program every redirected frame is
// counted as a successful redirect of the program that made it.
func TestXDPRedirectSuccess(t *testing.T) {
	c := newTestXDP(t, XDPConfig{RedirectSuccess: true})
	in, _ := xdpRedirectLab(t)
	const n = 50_000
	vethtest.SendExactly(t, in, n)
	mfs := gather(t, c)
	if got := mfs.Value(t, "xdp_monitor_redirects_total", "device", in.Host.Name); got != n {
		t.Fatalf("redirects = %v, want %d", got, n)
	}
	if v := mfs.Value(t, "xdp_monitor_tracepoint_attached", "tracepoint", "xdp:xdp_redirect"); v != 1 {
		t.Fatalf("xdp:xdp_redirect attached = %v", v)
	}
}

// TestXDPMissingTracepoint is the kernel-drift case that stops xdp-tools
// 1.3.1 on this kernel: one program targets a tracepoint the kernel does
// not have. The others still attach and count, and the collector reports
// the missing one as unsupported here, not as a failure.
func TestXDPMissingTracepoint(t *testing.T) {
	testenv.Privileged(t)
	spec, err := xdpmon.Spec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Programs[xdpmon.XdpmonProgXdpDevmapXmit].AttachTo = "xdp_no_such_tracepoint"
	c, err := newXDPCollector(XDPConfig{Xmit: true}, slog.New(slog.DiscardHandler), spec)
	testenv.Check(t, err, "starting the monitor collector with one missing tracepoint")
	defer c.Close()

	in, out := xdpRedirectLab(t)
	const n = 10_000
	vethtest.SendExactly(t, in, n)
	// Also exercise a tracepoint that is still attached.
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdictTo(t, pair.Host.Index, xdptest.Aborted)
	vethtest.SendExactly(t, pair, n)

	mfs, err := gatherErr(t, c)
	if !unsupportedOnly(err) || !strings.Contains(err.Error(), "xdp:xdp_no_such_tracepoint") {
		t.Errorf("Update error = %v, want unsupported alone, naming xdp:xdp_no_such_tracepoint", err)
	}
	if v := mfs.Value(t, "xdp_monitor_tracepoint_attached", "tracepoint", "xdp:xdp_no_such_tracepoint"); v != 0 {
		t.Fatalf("missing tracepoint reported attached = %v", v)
	}
	if v := mfs.Value(t, "xdp_monitor_tracepoint_attached", "tracepoint", "xdp:xdp_exception"); v != 1 {
		t.Fatalf("xdp:xdp_exception attached = %v", v)
	}
	if got := mfs.Value(t, "xdp_monitor_exceptions_total", "device", pair.Host.Name, "action", "aborted"); got != n {
		t.Fatalf("exceptions = %v, want %d", got, n)
	}
	if k := len(mfs.Series("xdp_monitor_devmap_xmit_packets_total", "from_device", in.Host.Name, "to_device", out.Host.Name)); k != 0 {
		t.Fatalf("devmap xmit counted through a tracepoint that was not attached")
	}
}

// TestXDPProtoMismatch: a program whose tracepoint exists but whose
// prototype differs from the one it was written for is not loaded, and
// every scrape reports that as a failure (success 0), not as unsupported.
func TestXDPProtoMismatch(t *testing.T) {
	testenv.Privileged(t)
	spec, err := xdpmon.Spec()
	if err != nil {
		t.Fatal(err)
	}
	// The exception program pointed at xdp_bulk_tx, whose second argument
	// is an int, not a struct bpf_prog *.
	spec.Programs[xdpmon.XdpmonProgXdpException].AttachTo = "xdp_bulk_tx"
	spec.Programs[xdpmon.XdpmonProgXdpBulkTx].AttachTo = "xdp_no_such_tracepoint"
	c, err := newXDPCollector(XDPConfig{Xmit: true}, slog.New(slog.DiscardHandler), spec)
	testenv.Check(t, err, "starting the monitor collector")
	defer c.Close()
	mfs, err := gatherErr(t, c)
	if err == nil || !strings.Contains(err.Error(), "xdp:xdp_bulk_tx") {
		t.Errorf("Update error = %v, want a failure naming xdp:xdp_bulk_tx", err)
	}
	if unsupportedOnly(err) {
		t.Errorf("a refused program reads as unsupported only: %v", err)
	}
	if v := mfs.Value(t, "xdp_monitor_tracepoint_attached", "tracepoint", "xdp:xdp_bulk_tx"); v != 0 {
		t.Fatalf("program with a mismatched prototype attached = %v", v)
	}
}

// noXmitBefore63 is the "device without ndo_xdp_xmit" case on kernels
// before 6.3, which do not check at enqueue whether the target can
// transmit XDP frames (the xdp_features check came with 6.3): the redirect
// succeeds, and the frames are dropped at bulk transmit, where veth
// refuses them with ENXIO. The default collector sees no redirect error;
// with --collector.monitor.xmit it counts every frame as a devmap drop.
func noXmitBefore63(t *testing.T, pair, noXmit *vethns.Pair, n uint64) {
	t.Helper()
	c := newTestXDP(t, XDPConfig{Xmit: true})
	vethtest.SendExactly(t, pair, n)
	mfs := gather(t, c)
	if k := len(mfs.Series("xdp_monitor_redirect_errors_total", "device", pair.Host.Name)); k != 0 {
		t.Errorf("%d redirect error series for %s on a kernel that does not check the target, want 0", k, pair.Host.Name)
	}
	if got := mfs.Value(t, "xdp_monitor_devmap_xmit_drops_total", "from_device", pair.Host.Name, "to_device", noXmit.Host.Name); got != float64(n) {
		t.Fatalf("xdp_monitor_devmap_xmit_drops_total from %s to %s = %v, want %d", pair.Host.Name, noXmit.Host.Name, got, n)
	}
}

// TestXDPXmitOptIn: by default only the failure tracepoints are attached;
// --collector.monitor.xmit adds the four bulk transmit ones, and
// --collector.monitor.redirect-success the per-packet redirect ones.
func TestXDPXmitOptIn(t *testing.T) {
	testenv.Privileged(t)
	failures := []string{"xdp_exception", "xdp_redirect_err"}
	success := []string{"xdp_redirect"}
	// Kernels that still have the map variants (6.1 and 6.12 of the
	// matrix, not 6.18), which newer ones folded into the tracepoints
	// above: the collector attaches them too.
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kernel.AnyTypeByName("btf_trace_xdp_redirect_map_err"); err == nil {
		failures = append(failures, "xdp_redirect_map_err")
		success = append(success, "xdp_redirect_map")
	}
	xmit := []string{"xdp_bulk_tx", "xdp_cpumap_enqueue", "xdp_cpumap_kthread", "xdp_devmap_xmit"}
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, failures},
		{[]string{"--collector.monitor.xmit"}, append(slices.Clone(failures), xmit...)},
		{[]string{"--collector.monitor.redirect-success"}, append(slices.Clone(failures), success...)},
	} {
		added := linksAddedBy(t, "monitor", tc.args)
		want := slices.Sorted(slices.Values(tc.want))
		if !slices.Equal(added, want) {
			t.Errorf("flags %q attached %q, want %q", tc.args, added, want)
		}
	}
}

// TestXDPCpumap: frames redirected into a cpumap entry are all counted at
// enqueue, and each is either dropped there (queue full) or processed by
// the kthread on the entry's CPU.
func TestXDPCpumap(t *testing.T) {
	c := newTestXDP(t, XDPConfig{Xmit: true})
	pair := vethtest.Pair(t, 2)
	cpumap, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.CPUMap, KeySize: 4, ValueSize: 4, MaxEntries: 2})
	testenv.Check(t, err, "creating a cpumap")
	defer cpumap.Close()
	if err := cpumap.Put(uint32(1), uint32(512)); err != nil { // CPU 1, queue size 512
		t.Fatal(err)
	}
	info, err := cpumap.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	mapID := fmt.Sprint(id)
	xdpAttach(t, pair.Host.Index, xdpLoad(t, asm.Instructions{
		asm.LoadMapPtr(asm.R1, cpumap.FD()),
		asm.Mov.Imm(asm.R2, 1),
		asm.Mov.Imm(asm.R3, 0),
		asm.FnRedirectMap.Call(),
		asm.Return(),
	}))
	const n = 50_000
	vethtest.SendExactly(t, pair, n)

	// The kthread drains its queue asynchronously.
	deadline := time.Now().Add(5 * time.Second)
	for {
		mfs := gather(t, c)
		enq := mfs.Value(t, "xdp_monitor_cpumap_enqueue_packets_total", "map_id", mapID, "to_cpu", "1")
		drops := mfs.Value(t, "xdp_monitor_cpumap_enqueue_drops_total", "map_id", mapID, "to_cpu", "1")
		bulks := mfs.Value(t, "xdp_monitor_cpumap_enqueue_bulks_total", "map_id", mapID, "to_cpu", "1")
		var done float64
		if len(mfs.Series("xdp_monitor_cpumap_kthread_packets_total", "map_id", mapID)) > 0 {
			done = mfs.Value(t, "xdp_monitor_cpumap_kthread_packets_total", "map_id", mapID, "cpu", "1")
		}
		if enq != n {
			t.Fatalf("cpumap enqueue packets = %v, want %d", enq, n)
		}
		if done+drops == n {
			t.Logf("enqueued %v in %v bulks, %v dropped at enqueue, %v processed by the kthread on CPU 1", enq, bulks, drops, done)
			if bulks == 0 || enq/bulks > 8 {
				t.Fatalf("enqueue bulk average %v/%v outside (0, 8] (CPU_MAP_BULK_SIZE)", enq, bulks)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kthread processed %v + enqueue drops %v != %d", done, drops, n)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestXDPMapFull: a full map stops new series and counts the events it
// could not place; the series it holds keep counting.
func TestXDPMapFull(t *testing.T) {
	testenv.Privileged(t)
	spec, err := xdpmon.Spec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Maps[xdpmon.XdpmonMapExceptions].MaxEntries = 1
	c, err := newXDPCollector(XDPConfig{}, slog.New(slog.DiscardHandler), spec)
	testenv.Check(t, err, "starting the monitor collector")
	defer c.Close()

	first, second := vethtest.Pair(t, 2), vethtest.Pair(t, 2)
	vethtest.AttachVerdictTo(t, first.Host.Index, xdptest.Aborted)
	vethtest.AttachVerdictTo(t, second.Host.Index, xdptest.Aborted)
	const n = 10_000
	vethtest.SendExactly(t, first, n)
	vethtest.SendExactly(t, second, n)
	vethtest.SendExactly(t, first, n)

	mfs := gather(t, c)
	if got := mfs.Value(t, "xdp_monitor_exceptions_total", "device", first.Host.Name); got != 2*n {
		t.Fatalf("exceptions on the device holding the only slot = %v, want %d", got, 2*n)
	}
	if k := len(mfs.Series("xdp_monitor_exceptions_total")); k != 1 {
		t.Fatalf("%d exception series with max_entries 1", k)
	}
	if got := mfs.Value(t, "xdp_monitor_map_full_events_total", "map", "exceptions"); got != n {
		t.Fatalf("map full events = %v, want %d", got, n)
	}
}

// TestXDPBulkTx: veth's XDP_TX flushes are traced per bulk. With an XDP
// program on the peer every frame goes back out; without one the peer
// cannot take XDP frames and every flush fails.
func TestXDPBulkTx(t *testing.T) {
	c := newTestXDP(t, XDPConfig{Xmit: true})
	const n = 20_000
	for _, tc := range []struct {
		name      string
		peerProg  bool
		sent, drp float64
	}{
		{"peer with XDP", true, n, 0},
		{"peer without XDP", false, 0, n},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pair := vethtest.Pair(t, 2)
			if tc.peerProg {
				if err := pair.Do(func() error { vethtest.AttachVerdictTo(t, pair.Peer.Index, xdptest.Drop); return nil }); err != nil {
					t.Fatal(err)
				}
			}
			vethtest.AttachVerdictTo(t, pair.Host.Index, xdptest.TX)
			vethtest.SendExactly(t, pair, n)
			mfs := gather(t, c)
			sent := mfs.Value(t, "xdp_monitor_bulk_tx_packets_total", "device", pair.Host.Name)
			drops := mfs.Value(t, "xdp_monitor_bulk_tx_drops_total", "device", pair.Host.Name)
			bulks := mfs.Value(t, "xdp_monitor_bulk_tx_bulks_total", "device", pair.Host.Name)
			errs := mfs.Value(t, "xdp_monitor_bulk_tx_errors_total", "device", pair.Host.Name)
			t.Logf("sent %v, drops %v, %v bulks, %v failed", sent, drops, bulks, errs)
			if sent != tc.sent || drops != tc.drp {
				t.Fatalf("bulk_tx sent %v drops %v, want %v and %v", sent, drops, tc.sent, tc.drp)
			}
			if (errs == 0) != tc.peerProg || bulks == 0 {
				t.Fatalf("bulk_tx errors %v in %v bulks", errs, bulks)
			}
		})
	}
}
