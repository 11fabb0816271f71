package rtnl

import (
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// linkOf is the device of ifindex in one dump.
func linkOf(t *testing.T, ifindex int) Link {
	t.Helper()
	links, err := Dump()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(links, func(l Link) bool { return int(l.Index) == ifindex })
	if i < 0 {
		t.Fatalf("the dump lacks ifindex %d", ifindex)
	}
	return links[i]
}

// TestDumpXDPModes dumps a veth of two queues: its name, its queue
// count, and its program by mode: native through a bpf_link, which
// DetachXDP leaves (the kernel keeps a link's program from netlink), then
// generic through netlink, which DetachXDP removes. The kernel refuses
// native and generic at once, so they are attached one after the other.
func TestDumpXDPModes(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	if l := linkOf(t, pair.Host.Index); l.Name != pair.Host.Name || l.RxQueues != 2 || len(l.XDP) != 0 {
		t.Fatalf("dumped %+v, want %s with 2 RX queues and no XDP", l, pair.Host.Name)
	}
	native := verdict(t, "rtnl_native")
	nl, err := link.AttachXDP(link.XDPOptions{Program: native, Interface: pair.Host.Index})
	testenv.Check(t, err, "attaching XDP")
	want := []XDPProg{{Mode: "native", ProgID: progID(t, native)}}
	if got := linkOf(t, pair.Host.Index).XDP; !slices.Equal(got, want) {
		t.Errorf("XDP of %s: %+v, want %+v", pair.Host.Name, got, want)
	}
	if err := DetachXDP(uint32(pair.Host.Index)); err != nil {
		t.Fatal(err)
	}
	if got := linkOf(t, pair.Host.Index).XDP; !slices.Equal(got, want) {
		t.Errorf("DetachXDP removed a bpf_link's program: %+v", got)
	}
	nl.Close()

	generic := verdict(t, "rtnl_generic")
	dev, err := netlink.LinkByIndex(pair.Host.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := netlink.LinkSetXdpFdWithFlags(dev, generic.FD(), unix.XDP_FLAGS_SKB_MODE); err != nil {
		t.Fatalf("attaching in generic mode: %v", err)
	}
	want = []XDPProg{{Mode: "generic", ProgID: progID(t, generic)}}
	if got := linkOf(t, pair.Host.Index).XDP; !slices.Equal(got, want) {
		t.Errorf("XDP of %s: %+v, want %+v", pair.Host.Name, got, want)
	}
	if err := DetachXDP(uint32(pair.Host.Index)); err != nil {
		t.Fatal(err)
	}
	if got := linkOf(t, pair.Host.Index).XDP; len(got) != 0 {
		t.Errorf("after DetachXDP: %+v, want none", got)
	}
}

func verdict(t *testing.T, name string) *ebpf.Program {
	t.Helper()
	p, err := xdptest.Verdict(name, xdptest.Pass)
	testenv.Check(t, err, "loading a program")
	t.Cleanup(func() { p.Close() })
	return p
}

func progID(t *testing.T, p *ebpf.Program) uint32 {
	t.Helper()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	return uint32(id)
}

// TestParseLinkShort refuses a message shorter than struct ifinfomsg.
func TestParseLinkShort(t *testing.T) {
	if _, err := ParseLink(make([]byte, unix.SizeofIfInfomsg-1)); err == nil {
		t.Error("a short message parsed")
	}
}
