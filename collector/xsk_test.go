package collector

import (
	"encoding/binary"
	"encoding/hex"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xskdiag"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

// constructedXSK are the sockets of the constructed sock_diag reply: one
// bound to eth0 queue 3 (an xdpsock-style rxdrop run), one bound to a
// device unknown to the exporter, one not bound yet (kernels before 6.x
// list unbound sockets without XDP_DIAG_INFO).
var constructedXSK = []struct {
	inode, ifindex, queue uint32
	bound                 bool
	rings                 map[string]uint32 // ring -> entries; rx/tx, then the UMEM's
	stats                 [len(xskStatNames)]uint64
}{
	{inode: 40123, ifindex: 4, queue: 3, bound: true, rings: map[string]uint32{"rx": 2048, "fill": 4096, "completion": 2048},
		stats: [...]uint64{1200, 0, 35000, 981234, 0, 77}},
	{inode: 40124, ifindex: 99, queue: 0, bound: true, rings: map[string]uint32{"rx": 64, "tx": 64, "fill": 64, "completion": 64},
		stats: [...]uint64{0, 2, 0, 5, 1, 0}},
	{inode: 40125},
}

// xdpDiagUmemLen is sizeof(struct xdp_diag_umem), which the collector skips.
const xdpDiagUmemLen = 40

// xskFixture builds the reply the way net/xdp/xsk_diag.c fills it for a
// request with XDP_SHOW_INFO|XDP_SHOW_RING_CFG|XDP_SHOW_UMEM|XDP_SHOW_STATS:
// struct xdp_diag_msg, then XDP_DIAG_INFO, XDP_DIAG_UID, XDP_DIAG_RX_RING
// and XDP_DIAG_TX_RING (those set up), XDP_DIAG_UMEM with the fill and
// completion rings, and XDP_DIAG_STATS.
func xskFixture(t testing.TB) []netlink.Message {
	var out []netlink.Message
	for _, s := range constructedXSK {
		msg := make([]byte, xskdiag.MsgLen)
		msg[0] = unix.AF_XDP
		msg[1] = unix.SOCK_RAW
		binary.NativeEndian.PutUint32(msg[4:], s.inode)
		binary.NativeEndian.PutUint64(msg[8:], uint64(s.inode)<<8|1) // socket cookie
		ae := netlink.NewAttributeEncoder()
		if s.bound {
			info := make([]byte, xskdiag.InfoLen)
			binary.NativeEndian.PutUint32(info, s.ifindex)
			binary.NativeEndian.PutUint32(info[4:], s.queue)
			ae.Bytes(xskdiag.DiagInfo, info)
			ae.Uint32(2, 0) // XDP_DIAG_UID: root
		}
		for _, r := range []struct {
			typ  uint16
			name string
		}{{xskdiag.DiagRxRing, "rx"}, {xskdiag.DiagTxRing, "tx"}, {5, ""}, {xskdiag.DiagFillRing, "fill"}, {xskdiag.DiagCompletionRing, "completion"}} {
			if r.typ == 5 && s.rings != nil { // XDP_DIAG_UMEM
				ae.Bytes(5, make([]byte, xdpDiagUmemLen))
			}
			if n, ok := s.rings[r.name]; ok {
				ae.Uint32(r.typ, n) // struct xdp_diag_ring
			}
		}
		st := make([]byte, xskdiag.StatsLen)
		for i, v := range s.stats {
			binary.NativeEndian.PutUint64(st[8*i:], v)
		}
		ae.Bytes(xskdiag.DiagStats, st)
		attrs, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, netlink.Message{
			Header: netlink.Header{Length: uint32(16 + len(msg) + len(attrs)), Type: xskdiag.SockDiagByFamily, Flags: netlink.Multi, Sequence: 1, PID: 4000},
			Data:   append(msg, attrs...),
		})
	}
	return out
}

const xskFixturePath = "../internal/kernel/xskdiag/testdata/xdp-diag.hex"

type replayXSK struct{ msgs []netlink.Message }

func (r replayXSK) Dump() ([]netlink.Message, error) { return r.msgs, nil }
func (replayXSK) Close() error                       { return nil }

func readXSKFixture(t *testing.T) []netlink.Message {
	b, err := os.ReadFile(xskFixturePath)
	if err != nil {
		t.Fatal(err)
	}
	var out []netlink.Message
	for _, line := range strings.Split(string(b), "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, err := hex.DecodeString(line)
		if err != nil {
			t.Fatal(err)
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(raw); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// TestXSKDecode decodes the constructed AF_XDP diag reply (no kernel here
// has CONFIG_XDP_SOCKETS_DIAG) and keeps the file equal to the code that
// builds it; -netdev.capture rewrites it.
func TestXSKDecode(t *testing.T) {
	if *captureNetdev {
		var b strings.Builder
		b.WriteString("# CONSTRUCTED, not captured: the development VM's kernel lacks CONFIG_XDP_SOCKETS_DIAG.\n")
		b.WriteString("# Built by xskFixture (xsk_test.go) as net/xdp/xsk_diag.c fills it; regenerate with\n")
		b.WriteString("# go test ./collector -run 'TestNetdevFixtures|TestXSKDecode' -netdev.capture\n")
		for _, m := range xskFixture(t) {
			raw, err := m.MarshalBinary()
			if err != nil {
				t.Fatal(err)
			}
			b.WriteString(hex.EncodeToString(raw) + "\n")
		}
		if err := os.WriteFile(filepath.FromSlash(xskFixturePath), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	msgs := readXSKFixture(t)
	want := xskFixture(t)
	if !reflect.DeepEqual(msgs, want) {
		t.Fatalf("%s differs from xskFixture; rerun with -netdev.capture", xskFixturePath)
	}
	c := onLinks{&xskCollector{logger: slog.New(slog.DiscardHandler), src: replayXSK{msgs}}, fixtureLinks()}
	mfs := gather(t, c)
	for _, s := range constructedXSK {
		dev, queue := "", ""
		if s.bound {
			dev, queue = fixtureNames[s.ifindex], itoa(s.queue)
			if dev == "" {
				dev = "ifindex:" + itoa(s.ifindex)
			}
		}
		for i, st := range xskStatNames {
			if v := value(t, mfs, "xdp_xsk_"+st.metric, "inode", itoa(s.inode), "device", dev, "queue", queue); v != float64(s.stats[i]) {
				t.Errorf("socket %d %s = %v, want %v", s.inode, st.field, v, s.stats[i])
			}
		}
		if _, n := exportertest.Match(mfs, "xdp_xsk_ring_entries", "inode", itoa(s.inode)); n != len(s.rings) {
			t.Errorf("socket %d: %d ring series, want %d", s.inode, n, len(s.rings))
		}
		for ring, want := range s.rings {
			if v := value(t, mfs, "xdp_xsk_ring_entries", "inode", itoa(s.inode), "device", dev, "queue", queue, "ring", ring); v != float64(want) {
				t.Errorf("socket %d %s ring = %v entries, want %d", s.inode, ring, v, want)
			}
		}
	}
}

func itoa(v uint32) string { return strconv.FormatUint(uint64(v), 10) }

// TestXSKDecodeErrors rejects truncated and foreign messages.
func TestXSKDecodeErrors(t *testing.T) {
	good := xskFixture(t)[0]
	for name, data := range map[string][]byte{
		"short header": good.Data[:8],
		"wrong family": append([]byte{unix.AF_INET}, good.Data[1:]...),
		"short stats":  good.Data[:len(good.Data)-8],
	} {
		if _, err := xskdiag.Decode([]netlink.Message{{Data: data}}); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

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
