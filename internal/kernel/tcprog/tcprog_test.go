package tcprog_test

import (
	"errors"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/tcprog"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

func progID(t *testing.T, p *ebpf.Program) ebpf.ProgramID {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, ok := info.ID()
	if !ok {
		t.Fatal("the kernel reports no program id")
	}
	return id
}

func linkID(t *testing.T, l link.Link) link.ID {
	t.Helper()
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	return info.ID
}

// TestTC puts two filters on a veth's ingress (preferences 2 and 1) and
// one on its egress under clsact, and a legacy ingress qdisc on another
// device: the qdisc dump gives each device its hooks, and the filter
// dump returns the programs in preference order, without a link.
func TestTC(t *testing.T) {
	pair, other := vethtest.Pair(t, 1), vethtest.Pair(t, 1)
	dev := uint32(pair.Host.Index)
	first, second, out := vethtest.TCProgram(t, "tcprog_first"), vethtest.TCProgram(t, "tcprog_second"), vethtest.TCProgram(t, "tcprog_egress")
	vethtest.AttachTC(t, pair.Host.Index, "ingress", 2, second)
	vethtest.AttachTC(t, pair.Host.Index, "ingress", 1, first)
	vethtest.AttachTC(t, pair.Host.Index, "egress", 1, out)
	ingress := &netlink.Ingress{QdiscAttrs: netlink.QdiscAttrs{LinkIndex: other.Host.Index, Handle: netlink.MakeHandle(0xffff, 0), Parent: netlink.HANDLE_INGRESS}}
	if err := netlink.QdiscAdd(ingress); err != nil {
		t.Fatalf("adding an ingress qdisc: %v", err)
	}

	d, err := tcprog.NewDumper()
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	hooks, err := d.QdiscHooks()
	if err != nil {
		t.Fatal(err)
	}
	if got := hooks[dev]; !slices.Equal(got, []string{"ingress", "egress"}) {
		t.Errorf("hooks of %s (clsact): %v, want ingress and egress", pair.Host.Name, got)
	}
	if got := hooks[uint32(other.Host.Index)]; !slices.Equal(got, []string{"ingress"}) {
		t.Errorf("hooks of %s (ingress qdisc): %v, want ingress", other.Host.Name, got)
	}
	if got, ok := hooks[uint32(other.Peer.Index)]; ok {
		t.Errorf("hooks of a device without clsact: %v, want none", got)
	}

	got, err := d.TC(dev, "ingress")
	if err != nil {
		t.Fatal(err)
	}
	want := []tcprog.Attachment{
		{Ifindex: dev, Kind: tcprog.KindTC, Direction: "ingress", Order: 0, Prog: progID(t, first)},
		{Ifindex: dev, Kind: tcprog.KindTC, Direction: "ingress", Order: 1, Prog: progID(t, second)},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ingress filters: %+v, want %+v", got, want)
	}
	got, err = d.TC(dev, "egress")
	if err != nil {
		t.Fatal(err)
	}
	if want := []tcprog.Attachment{{Ifindex: dev, Kind: tcprog.KindTC, Direction: "egress", Prog: progID(t, out)}}; !slices.Equal(got, want) {
		t.Errorf("egress filters: %+v, want %+v", got, want)
	}
	if got, err := d.TC(uint32(other.Host.Index), "ingress"); err != nil || len(got) != 0 {
		t.Errorf("filters of an ingress qdisc without any: %+v, %v; want none", got, err)
	}
	if _, err := d.TC(dev, "sideways"); err == nil {
		t.Error("TC took a direction that is neither ingress nor egress")
	}
}

// TestTCX attaches two programs to a veth's tcx ingress, the second
// before the first, and one to its egress, each through a bpf_link, where
// the kernel has tcx as the exporter probes it. Without tcx the probe
// says unsupported and the kernel refuses the attachment too.
func TestTCX(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	dev := uint32(pair.Host.Index)
	a, b, e := vethtest.TCProgram(t, "tcx_a"), vethtest.TCProgram(t, "tcx_b"), vethtest.TCProgram(t, "tcx_e")
	attach := func(p *ebpf.Program, at ebpf.AttachType, anchor link.Anchor) (link.Link, error) {
		l, err := link.AttachTCX(link.TCXOptions{Interface: pair.Host.Index, Program: p, Attach: at, Anchor: anchor})
		if err == nil {
			t.Cleanup(func() { l.Close() })
		}
		return l, err
	}
	probe := tcprog.ProbeTCX()
	if errors.Is(probe, errors.ErrUnsupported) {
		if _, err := attach(a, ebpf.AttachTCXIngress, nil); err == nil {
			t.Fatalf("the probe says %v, and the kernel attached a tcx program", probe)
		}
		t.Logf("this kernel has no tcx, as probed and as the attachment shows: %v", probe)
		return
	}
	if probe != nil {
		t.Fatal(probe)
	}
	la, err := attach(a, ebpf.AttachTCXIngress, nil)
	testenv.Check(t, err, "attaching tcx ingress")
	lb, err := attach(b, ebpf.AttachTCXIngress, link.BeforeProgram(a))
	testenv.Check(t, err, "attaching tcx ingress before the first")
	le, err := attach(e, ebpf.AttachTCXEgress, nil)
	testenv.Check(t, err, "attaching tcx egress")

	got, err := tcprog.TCX(dev)
	if err != nil {
		t.Fatal(err)
	}
	want := []tcprog.Attachment{
		{Ifindex: dev, Kind: tcprog.KindTCX, Direction: "ingress", Order: 0, Prog: progID(t, b), Link: linkID(t, lb)},
		{Ifindex: dev, Kind: tcprog.KindTCX, Direction: "ingress", Order: 1, Prog: progID(t, a), Link: linkID(t, la)},
		{Ifindex: dev, Kind: tcprog.KindTCX, Direction: "egress", Order: 0, Prog: progID(t, e), Link: linkID(t, le)},
	}
	if !slices.Equal(got, want) {
		t.Errorf("tcx programs:\n got %+v\nwant %+v", got, want)
	}
}

// TestNetkit makes a netkit pair where the kernel has netkit as the
// exporter probes it and attaches a program to each side through the
// primary: the primary lists both, the peer none (the kernel answers
// EACCES there). Without netkit the probe says unsupported and the kernel
// refuses to make the device too.
func TestNetkit(t *testing.T) {
	testenv.Privileged(t)
	id := vethns.UniqueID()
	nk := &netlink.Netkit{LinkAttrs: netlink.LinkAttrs{Name: "nk" + id + "p"}, Mode: netlink.NETKIT_MODE_L2}
	nk.SetPeerAttrs(&netlink.LinkAttrs{Name: "nk" + id + "q"})
	probe := tcprog.ProbeNetkit()
	err := netlink.LinkAdd(nk)
	if err == nil {
		t.Cleanup(func() { _ = netlink.LinkDel(nk) })
	}
	if errors.Is(probe, errors.ErrUnsupported) {
		if err == nil {
			t.Fatalf("the probe says %v, and the kernel made a netkit device", probe)
		}
		t.Logf("this kernel has no netkit, as probed and as the device's creation shows: %v", probe)
		return
	}
	if probe != nil {
		t.Fatal(probe)
	}
	testenv.Check(t, err, "making a netkit pair")
	primary, err := netlink.LinkByName(nk.Name)
	if err != nil {
		t.Fatal(err)
	}
	peer, err := netlink.LinkByName("nk" + id + "q")
	if err != nil {
		t.Fatal(err)
	}
	p, q := vethtest.TCProgram(t, "netkit_primary"), vethtest.TCProgram(t, "netkit_peer")
	var links []link.ID
	for _, a := range []struct {
		prog *ebpf.Program
		at   ebpf.AttachType
	}{{p, ebpf.AttachNetkitPrimary}, {q, ebpf.AttachNetkitPeer}} {
		l, err := link.AttachNetkit(link.NetkitOptions{Interface: primary.Attrs().Index, Program: a.prog, Attach: a.at})
		testenv.Check(t, err, "attaching a netkit program")
		t.Cleanup(func() { l.Close() })
		links = append(links, linkID(t, l))
	}
	dev := uint32(primary.Attrs().Index)
	got, err := tcprog.Netkit(dev)
	if err != nil {
		t.Fatal(err)
	}
	want := []tcprog.Attachment{
		{Ifindex: dev, Kind: tcprog.KindNetkit, Direction: "primary", Prog: progID(t, p), Link: links[0]},
		{Ifindex: dev, Kind: tcprog.KindNetkit, Direction: "peer", Prog: progID(t, q), Link: links[1]},
	}
	if !slices.Equal(got, want) {
		t.Errorf("netkit programs of the primary:\n got %+v\nwant %+v", got, want)
	}
	if got, err := tcprog.Netkit(uint32(peer.Attrs().Index)); err != nil || len(got) != 0 {
		t.Errorf("netkit programs of the peer: %+v, %v; want none (its primary holds them)", got, err)
	}
}

// TestUnsupportedHint: a kernel without netkit is too old for it before
// 6.7 and was built without CONFIG_NETKIT since; a 6.18 kernel without it
// once read "needs Linux 6.7 or later".
func TestUnsupportedHint(t *testing.T) {
	for _, c := range []struct {
		kind         string
		major, minor int
		want         string
	}{
		{tcprog.KindNetkit, 5, 10, "needs Linux 6.7 or later"},
		{tcprog.KindNetkit, 6, 6, "needs Linux 6.7 or later"},
		{tcprog.KindNetkit, 6, 7, "the kernel was built without CONFIG_NETKIT"},
		{tcprog.KindNetkit, 6, 18, "the kernel was built without CONFIG_NETKIT"},
		{tcprog.KindTCX, 6, 1, "needs Linux 6.6 or later"},
	} {
		if got := tcprog.UnsupportedHint(c.kind, c.major, c.minor); got != c.want {
			t.Errorf("%s on %d.%d: %q, want %q", c.kind, c.major, c.minor, got, c.want)
		}
	}
}
