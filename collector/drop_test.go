package collector

import (
	"log/slog"
	"net"
	"testing"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// newTestDrop builds the drop collector, or reports false where the kernel
// predates drop reasons, after checking that it says so as unsupported.
func newTestDrop(t *testing.T) (Collector, bool) {
	t.Helper()
	testenv.Privileged(t)
	c, err := NewDropCollector(DropConfig{}, slog.New(slog.DiscardHandler))
	if testenv.KernelBefore(t, 5, 17) {
		if !unsupportedOnly(err) {
			t.Fatalf("before 5.17 the drop collector must be unsupported, got %v", err)
		}
		t.Log(err)
		return nil, false
	}
	testenv.Check(t, err, "loading the drop collector")
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c, true
}

// TestDropNoSocketExact sends n UDP frames to a local address where no
// socket listens: the stack drops each one as NO_SOCKET on the DUT, and
// the collector counts exactly n there. Deleting the device then frees its
// slots: its series go, and a new device with its ifindex starts from zero.
func TestDropNoSocketExact(t *testing.T) {
	c, ok := newTestDrop(t)
	if !ok {
		return
	}
	pair := vethtest.Pair(t, 2)
	host, err := netlink.LinkByIndex(pair.Host.Index)
	testenv.Check(t, err, pair.Host.Name)
	// The generator's frames go from 198.18.0.1 to 198.18.0.2, UDP port
	// 9; XDP_PASS makes veth run NAPI and hand them to the stack.
	addr, err := netlink.ParseAddr("198.18.0.2/30")
	testenv.Check(t, err, "address")
	testenv.Check(t, netlink.AddrAdd(host, addr), "adding 198.18.0.2 to the DUT")
	vethtest.AttachVerdict(t, pair, xdptest.Pass)

	before := gather(t, c)
	// Bringing the pair up frees a few skbs as NOT_SPECIFIED; none has
	// reached a socket yet.
	if v, k := before.Sum("xdp_drop_packets_total", "device", pair.Host.Name, "reason", "NO_SOCKET"); k != 0 {
		t.Fatalf("a new device has %v NO_SOCKET drops before any traffic", v)
	}
	const n = 20_000
	vethtest.SendExactly(t, pair, n)
	after := gather(t, c)
	if got := after.Value(t, "xdp_drop_packets_total", "device", pair.Host.Name, "reason", "NO_SOCKET"); got != n {
		t.Errorf("NO_SOCKET drops on %s = %v, want %d", pair.Host.Name, got, n)
	}
	if got := after.Value(t, "xdp_drop_untracked_total"); got != 0 {
		t.Errorf("untracked drops = %v", got)
	}

	testenv.Check(t, pair.Close(), "deleting the pair")
	gather(t, c) // the sweep that sees the device gone frees its slots
	gone := gather(t, c)
	if v, k := gone.Sum("xdp_drop_packets_total", "device", pair.Host.Name); k != 0 {
		t.Errorf("the deleted device still has %d drop series (%v)", k, v)
	}
	if v, k := gone.Sum("xdp_drop_packets_total", "device", ifindexLabel(uint32(pair.Host.Index))); k != 0 {
		t.Errorf("the deleted device's ifindex still has %d drop series (%v)", k, v)
	}
}

// TestDropOtherNamespace drops in a namespace the exporter does not see:
// UDP to 127.0.0.1 port 9 in a fresh namespace is dropped as NO_SOCKET on
// its lo, which the collector names by namespace inode and the name the
// program recorded.
func TestDropOtherNamespace(t *testing.T) {
	c, ok := newTestDrop(t)
	if !ok {
		return
	}
	name := "xdpt-" + vethns.UniqueID()
	ns, err := vethns.NewNamespace(name, true)
	testenv.Check(t, err, "creating "+name)
	t.Cleanup(func() {
		ns.Close()
		if err := netns.DeleteNamed(name); err != nil {
			t.Errorf("deleting netns %s: %v", name, err)
		}
	})
	var inode uint64
	const n = 50
	err = vethns.InNamespace(ns, func() error {
		var st unix.Stat_t
		if err := unix.Stat("/proc/thread-self/ns/net", &st); err != nil {
			return err
		}
		inode = st.Ino
		lo, err := netlink.LinkByName("lo")
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(lo); err != nil {
			return err
		}
		// Unconnected: a connected socket would report the ICMP port
		// unreachable of one datagram as the error of the next write,
		// which is then not sent.
		conn, err := net.ListenUDP("udp4", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
		if err != nil {
			return err
		}
		defer conn.Close()
		for range n {
			if _, err := conn.WriteToUDP([]byte("x"), &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9}); err != nil {
				return err
			}
		}
		return nil
	})
	testenv.Check(t, err, "sending to a closed port in "+name)
	label := foreignLabel(inode, "lo")
	if got := gather(t, c).Value(t, "xdp_drop_packets_total", "device", label, "reason", "NO_SOCKET"); got != n {
		t.Errorf("NO_SOCKET drops on %s = %v, want %d", label, got, n)
	}
}
