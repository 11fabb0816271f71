package rtnl

import (
	"encoding/binary"
	"slices"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/mdlayher/netlink"
	vnl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// entryOf is ifindex's entry of one dump.
func entryOf[T any](t *testing.T, dump func() ([]T, error), index func(T) uint32, ifindex int) T {
	t.Helper()
	entries, err := dump()
	if err != nil {
		t.Fatal(err)
	}
	i := slices.IndexFunc(entries, func(e T) bool { return int(index(e)) == ifindex })
	if i < 0 {
		t.Fatalf("the dump lacks ifindex %d", ifindex)
	}
	return entries[i]
}

// linkOf is the device of ifindex in one link dump.
func linkOf(t *testing.T, ifindex int) Link {
	t.Helper()
	return entryOf(t, Dump, func(l Link) uint32 { return l.Index }, ifindex)
}

// TestDumpXDPModes dumps a veth of two queues: its name, its kind, its
// queue count, and its program by mode: native through a bpf_link, which
// DetachXDP leaves (the kernel keeps a link's program from netlink), then
// generic through netlink, which DetachXDP removes. The kernel refuses
// native and generic at once, so they are attached one after the other.
func TestDumpXDPModes(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	if l := linkOf(t, pair.Host.Index); l.Name != pair.Host.Name || l.Kind != "veth" || l.RxQueues != 2 || len(l.XDP) != 0 {
		t.Fatalf("dumped %+v, want veth %s with 2 RX queues and no XDP", l, pair.Host.Name)
	}
	if l := linkOf(t, 1); l.Name != "lo" || l.Kind != "" {
		t.Errorf("dumped %+v, want lo without a kind", l)
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
	dev, err := vnl.LinkByIndex(pair.Host.Index)
	if err != nil {
		t.Fatal(err)
	}
	if err := vnl.LinkSetXdpFdWithFlags(dev, generic.FD(), unix.XDP_FLAGS_SKB_MODE); err != nil {
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

// TestDumpStats64 sends an exact number of frames over a veth pair and
// reads the receiving end's counters: each frame is received (rx_packets)
// or dropped because the end's XDP ring was full (rx_dropped, veth's
// peer_tq_xdp_xmit_err), and every field `ip -s -s link` prints agrees
// with the dump.
func TestDumpStats64(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	vethtest.AttachVerdict(t, pair, xdptest.Pass)
	const frames = 1000
	vethtest.SendExactly(t, pair, frames)

	// The receiving end's NAPI counts the frames after the send returns.
	var got LinkStats
	var rx, dropped uint64
	for deadline := time.Now().Add(5 * time.Second); rx+dropped != frames && time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		got = hostStats(t, pair.Host.Index)
		rx, _ = got.Field("rx_packets")
		dropped, _ = got.Field("rx_dropped")
	}
	if rx+dropped != frames || rx == 0 {
		t.Errorf("%s: rx_packets %d + rx_dropped %d, want the %d frames sent", pair.Host.Name, rx, dropped, frames)
	}
	wantRx, wantTx := vethtest.IPStats64(t, "", pair.Host.Name)
	for ipName, field := range map[string]string{
		"packets": "rx_packets", "bytes": "rx_bytes", "dropped": "rx_dropped", "over_errors": "rx_over_errors",
		"fifo_errors": "rx_fifo_errors", "missed_errors": "rx_missed_errors", "crc_errors": "rx_crc_errors",
	} {
		if v, ok := got.Field(field); !ok || v != wantRx[ipName] {
			t.Errorf("%s of %s: %d (sent: %v), ip -s link says %d", field, pair.Host.Name, v, ok, wantRx[ipName])
		}
	}
	for ipName, field := range map[string]string{"packets": "tx_packets", "bytes": "tx_bytes", "dropped": "tx_dropped"} {
		if v, _ := got.Field(field); v != wantTx[ipName] {
			t.Errorf("%s of %s: %d, ip -s link says %d", field, pair.Host.Name, v, wantTx[ipName])
		}
	}
}

// hostStats is ifindex's entry of one statistics dump.
func hostStats(t *testing.T, ifindex int) LinkStats {
	t.Helper()
	return entryOf(t, DumpStats64, func(s LinkStats) uint32 { return s.Index }, ifindex)
}

// statsMessage is an RTM_NEWSTATS body as the kernel builds it: the
// if_stats_msg, a 64-bit pad, and IFLA_STATS_LINK_64 of n counters valued
// 1..n.
func statsMessage(t *testing.T, ifindex uint32, n int) []byte {
	t.Helper()
	counters := make([]byte, 8*n)
	for i := range n {
		binary.NativeEndian.PutUint64(counters[8*i:], uint64(i+1))
	}
	ae := netlink.NewAttributeEncoder()
	ae.Bytes(unix.IFLA_STATS_UNSPEC, nil)
	ae.Bytes(unix.IFLA_STATS_LINK_64, counters)
	attrs, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return append(StatsRequest(ifindex), attrs...)
}

// TestParseStatsKernelVersions reads the 24 counters of a kernel before
// 6.0 and the 25 of later ones: a field the kernel did not send is absent,
// not zero.
func TestParseStatsKernelVersions(t *testing.T) {
	for _, n := range []int{24, 25} {
		s, err := ParseStats(statsMessage(t, 7, n))
		if err != nil {
			t.Fatal(err)
		}
		if s.Index != 7 || s.N != n {
			t.Fatalf("%d counters: parsed index %d with %d counters", n, s.Index, s.N)
		}
		if v, ok := s.Field("rx_missed_errors"); !ok || v != 16 {
			t.Errorf("%d counters: rx_missed_errors %d (%v), want 16, the 16th field", n, v, ok)
		}
		if _, ok := s.Field("rx_otherhost_dropped"); ok != (n == 25) {
			t.Errorf("%d counters: rx_otherhost_dropped present %v", n, ok)
		}
	}
	if _, err := ParseStats(make([]byte, sizeofIfStatsMsg-1)); err == nil {
		t.Error("a message shorter than if_stats_msg parsed")
	}
}

// BenchmarkDumpStats64 is the ethtool collector's per-scrape cost of the
// rtnl_link_stats64 of every device in the namespace.
func BenchmarkDumpStats64(b *testing.B) {
	for b.Loop() {
		if _, err := DumpStats64(); err != nil {
			b.Fatal(err)
		}
	}
}
