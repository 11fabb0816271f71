package collector

import (
	"log/slog"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xskdiag"
)

// xskSockets is an xskdiag.Reader of typed sockets.
type xskSockets []xskdiag.Socket

func (s xskSockets) Sockets() ([]xskdiag.Socket, error) { return s, nil }
func (xskSockets) Close() error                         { return nil }

// testSockets are an xdpsock-style rxdrop run on eth0 queue 3, a socket
// bound to a device the link dump lacks, and one not bound yet.
var testSockets = xskSockets{
	{Inode: 40123, Ifindex: 4, Queue: 3, HasInfo: true, HasStats: true,
		Rings: map[string]uint32{"rx": 2048, "fill": 4096, "completion": 2048},
		Stats: [xskdiag.NumStats]uint64{1200, 0, 35000, 981234, 0, 77}},
	{Inode: 40124, Ifindex: 99, HasInfo: true, HasStats: true,
		Rings: map[string]uint32{"rx": 64, "tx": 64, "fill": 64, "completion": 64},
		Stats: [xskdiag.NumStats]uint64{0, 2, 0, 5, 1, 0}},
	{Inode: 40125, HasStats: true},
	{Inode: 40126, Ifindex: 4, HasInfo: true}, // no XDP_DIAG_STATS: no series
}

// eth0Links is a dump of lo (1) and eth0 (4).
func eth0Links() *Links { return newLinks([]Link{{Index: 1, Name: "lo"}, {Index: 4, Name: "eth0"}}) }

// TestXSKMetrics maps each socket with statistics to its counters and
// rings, named by the device and queue it is bound to: ifindex:N for a
// device the dump lacks, empty for a socket not bound.
func TestXSKMetrics(t *testing.T) {
	c := onLinks{&xskCollector{logger: slog.New(slog.DiscardHandler), src: testSockets}, eth0Links()}
	mfs := gather(t, c)
	for _, s := range testSockets {
		dev, queue := "", ""
		if s.HasInfo {
			dev, queue = eth0Links().Label(s.Ifindex), itoa(s.Queue)
		}
		if !s.HasStats {
			if _, n := mfs.Sum("xdp_xsk_ring_entries", "inode", itoa(s.Inode)); n != 0 {
				t.Errorf("socket %d without statistics has %d series", s.Inode, n)
			}
			continue
		}
		for i, st := range xskStatNames {
			if v := mfs.Value(t, "xdp_xsk_"+st.metric, "inode", itoa(s.Inode), "device", dev, "queue", queue); v != float64(s.Stats[i]) {
				t.Errorf("socket %d %s = %v, want %v", s.Inode, st.field, v, s.Stats[i])
			}
		}
		if _, n := mfs.Sum("xdp_xsk_ring_entries", "inode", itoa(s.Inode)); n != len(s.Rings) {
			t.Errorf("socket %d: %d ring series, want %d", s.Inode, n, len(s.Rings))
		}
		for ring, want := range s.Rings {
			if v := mfs.Value(t, "xdp_xsk_ring_entries", "inode", itoa(s.Inode), "device", dev, "queue", queue, "ring", ring); v != float64(want) {
				t.Errorf("socket %d %s ring = %v entries, want %d", s.Inode, ring, v, want)
			}
		}
	}
	if v := mfs.Value(t, "xdp_xsk_rx_dropped_total", "inode", "40124"); v != 0 {
		t.Errorf("socket 40124 rx dropped %v", v)
	}
	if _, n := mfs.Sum("xdp_xsk_rx_dropped_total", "device", "ifindex:99"); n != 1 {
		t.Errorf("the socket on a device the dump lacks is not named ifindex:99")
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// TestXSKLive: on a kernel without CONFIG_XDP_SOCKETS_DIAG the constructor
// fails as unsupported with a clear reason (the framework then reports
// the collector unsupported, once, at INFO); with it, a scrape works.
func TestXSKLive(t *testing.T) {
	c, err := newXSKCollector(XSKConfig{}, slog.New(slog.DiscardHandler))
	if err != nil {
		if !unsupportedOnly(err) || !strings.Contains(err.Error(), unix.ENOENT.Error()) || !strings.Contains(err.Error(), "CONFIG_XDP_SOCKETS_DIAG") {
			t.Fatalf("unexpected error: %v", err)
		}
		t.Logf("as expected on this kernel: %v", err)
		return
	}
	defer c.Close()
	gather(t, c)
}
