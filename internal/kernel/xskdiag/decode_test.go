package xskdiag

import (
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nltest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

const recording = "testdata/xdp-diag.hex"

// constructed are the sockets of the constructed sock_diag reply: one
// bound to ifindex 4 queue 3 (an xdpsock-style rxdrop run), one bound to
// ifindex 99, one not bound yet (kernels before 6.x list unbound sockets
// without XDP_DIAG_INFO).
var constructed = []Socket{
	{Inode: 40123, Ifindex: 4, Queue: 3, HasInfo: true, HasStats: true,
		Rings: map[string]uint32{"rx": 2048, "fill": 4096, "completion": 2048},
		Stats: [NumStats]uint64{1200, 0, 35000, 981234, 0, 77}},
	{Inode: 40124, Ifindex: 99, HasInfo: true, HasStats: true,
		Rings: map[string]uint32{"rx": 64, "tx": 64, "fill": 64, "completion": 64},
		Stats: [NumStats]uint64{0, 2, 0, 5, 1, 0}},
	{Inode: 40125, HasStats: true},
}

// umemLen is sizeof(struct xdp_diag_umem), which Decode skips.
const umemLen = 40

// constructedReply builds the reply the way net/xdp/xsk_diag.c fills it
// for a request with XDP_SHOW_INFO|XDP_SHOW_RING_CFG|XDP_SHOW_UMEM|
// XDP_SHOW_STATS: struct xdp_diag_msg, then XDP_DIAG_INFO, XDP_DIAG_UID,
// XDP_DIAG_RX_RING and XDP_DIAG_TX_RING (those set up), XDP_DIAG_UMEM with
// the fill and completion rings, and XDP_DIAG_STATS.
func constructedReply(t testing.TB) []netlink.Message {
	var out []netlink.Message
	for _, s := range constructed {
		msg := make([]byte, MsgLen)
		msg[0] = unix.AF_XDP
		msg[1] = unix.SOCK_RAW
		binary.NativeEndian.PutUint32(msg[4:], s.Inode)
		binary.NativeEndian.PutUint64(msg[8:], uint64(s.Inode)<<8|1) // socket cookie
		ae := netlink.NewAttributeEncoder()
		if s.HasInfo {
			info := make([]byte, InfoLen)
			binary.NativeEndian.PutUint32(info, s.Ifindex)
			binary.NativeEndian.PutUint32(info[4:], s.Queue)
			ae.Bytes(DiagInfo, info)
			ae.Uint32(2, 0) // XDP_DIAG_UID: root
		}
		for _, r := range []struct {
			typ  uint16
			name string
		}{{DiagRxRing, "rx"}, {DiagTxRing, "tx"}, {5, ""}, {DiagFillRing, "fill"}, {DiagCompletionRing, "completion"}} {
			if r.typ == 5 && s.Rings != nil { // XDP_DIAG_UMEM
				ae.Bytes(5, make([]byte, umemLen))
			}
			if n, ok := s.Rings[r.name]; ok {
				ae.Uint32(r.typ, n) // struct xdp_diag_ring
			}
		}
		st := make([]byte, StatsLen)
		for i, v := range s.Stats {
			binary.NativeEndian.PutUint64(st[8*i:], v)
		}
		ae.Bytes(DiagStats, st)
		attrs, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, netlink.Message{
			Header: netlink.Header{Length: uint32(16 + len(msg) + len(attrs)), Type: SockDiagByFamily, Flags: netlink.Multi, Sequence: 1, PID: 4000},
			Data:   append(msg, attrs...),
		})
	}
	return out
}

// recorded replays the recording.
type recorded struct{}

func (r recorded) Dump() ([]netlink.Message, error) {
	b, err := nltest.ReadHex(recording)
	if err != nil {
		return nil, err
	}
	msgs, ok := nltest.Split(b)
	if !ok {
		return nil, errors.New("not netlink messages")
	}
	return msgs, nil
}

func (recorded) Close() error { return nil }

// TestDecodeRecording holds the recording to the code that builds it
// (XDP_EXPORTER_RECORD=1 rewrites it: no kernel here has
// CONFIG_XDP_SOCKETS_DIAG) and decodes it into the sockets it was built
// from.
func TestDecodeRecording(t *testing.T) {
	if testenv.Recording() {
		comment := "CONSTRUCTED, not captured: the development VM's kernel lacks CONFIG_XDP_SOCKETS_DIAG.\n" +
			"Built by constructedReply (internal/kernel/xskdiag/decode_test.go) as net/xdp/xsk_diag.c fills it;\n" +
			"regenerate with make generate RECORD=1"
		if err := nltest.WriteHex(recording, comment, constructedReply(t)); err != nil {
			t.Fatal(err)
		}
	}
	msgs, err := recorded{}.Dump()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(msgs, constructedReply(t)) {
		t.Fatalf("%s differs from constructedReply; make generate RECORD=1 rewrites it", recording)
	}
	socks, err := Decoded{recorded{}}.Sockets()
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(socks, constructed) {
		t.Errorf("decoded\n%+v\nwant\n%+v", socks, constructed)
	}
}

// TestDecodeErrors rejects truncated and foreign messages.
func TestDecodeErrors(t *testing.T) {
	good := constructedReply(t)[0]
	for name, data := range map[string][]byte{
		"short header": good.Data[:8],
		"wrong family": append([]byte{unix.AF_INET}, good.Data[1:]...),
		"short stats":  good.Data[:len(good.Data)-8],
	} {
		if _, err := Decode([]netlink.Message{{Data: data}}); err == nil {
			t.Errorf("%s: decoded without error", name)
		}
	}
}

// TestDialLive opens sock_diag on this kernel: without
// CONFIG_XDP_SOCKETS_DIAG Dial says so, as not supported, with the
// kernel's answer; with it, a dump decodes.
func TestDialLive(t *testing.T) {
	r, err := Dial()
	if errors.Is(err, ErrNotSupported) {
		if !errors.Is(err, errors.ErrUnsupported) || !strings.Contains(err.Error(), unix.ENOENT.Error()) {
			t.Fatalf("Dial = %v, want not supported naming ENOENT", err)
		}
		t.Logf("this kernel has no AF_XDP socket diag: %v", err)
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Sockets(); err != nil {
		t.Fatal(err)
	}
}
