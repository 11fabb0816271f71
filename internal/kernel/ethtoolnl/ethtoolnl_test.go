package ethtoolnl

import (
	"errors"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nltest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// replies holds recorded STATS_GET replies, one netlink message per line
// in hex:
//   - stats-get-eth-mac.hex, captured: the reply for lo of the running
//     kernel (make generate RECORD=capture), a device whose driver has no
//     get_eth_mac_stats: the group comes, empty;
//   - stats-get-eth-mac-constructed.hex, constructed by constructedReply as
//     net/ethtool/stats.c fills a reply for a driver that fills the MAC
//     counters (mlx5e_stats_eth_mac_get, bnxt_get_eth_mac_stats): no
//     machine here has such a NIC.
var replies = filepath.Join("testdata", "replies")

// familyID is the id the recordings carry (dynamic in the kernel).
const familyID = 0x15

// constructed are the counters of the constructed reply: an mlx5 port,
// whose driver fills frames and octets both ways but not the internal MAC
// errors, after an eth-phy group the reply also carries.
var constructed = MAC{Ifindex: 6, Name: "mlx5p1"}

func init() {
	for id, v := range map[int]uint64{FramesTransmittedOK: 5_000_000_123, FramesReceivedOK: 88_049_446_000, OctetsTransmittedOK: 320_000_007_872, OctetsReceivedOK: 5_635_164_544_000} {
		constructed.Values[id], constructed.Present[id] = v, true
	}
}

// constructedReply is stats_fill_reply's message for constructed: the
// header, the source (Linux 6.4), then one group per bit asked for, each
// its id, its string set, and one GRP_STAT nest per counter the driver
// filled.
func constructedReply(t testing.TB) genetlink.Message {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(aHeader, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(aHeaderIfindex, constructed.Ifindex)
		nae.String(aHeaderName, constructed.Name)
		return nil
	})
	ae.Uint32(5, 0) // ETHTOOL_A_STATS_SRC: ETHTOOL_MAC_STATS_SRC_AGGREGATE
	group := func(id, ssID uint32, stats map[uint16]uint64) {
		ae.Nested(aGroup, func(nae *netlink.AttributeEncoder) error {
			nae.Uint32(aGroupID, id)
			nae.Uint32(3, ssID) // ETHTOOL_A_STATS_GRP_SS_ID
			for _, sid := range slices.Sorted(maps.Keys(stats)) {
				nae.Nested(aGroupStat, func(sae *netlink.AttributeEncoder) error {
					sae.Uint64(sid, stats[sid])
					return nil
				})
			}
			return nil
		})
	}
	group(0, 17, map[uint16]uint64{0: 12}) // eth-phy, ETH_SS_STATS_ETH_PHY: SymbolErrorDuringCarrier
	mac := map[uint16]uint64{}
	for id, ok := range constructed.Present {
		if ok {
			mac[uint16(id)] = constructed.Values[id]
		}
	}
	group(groupEthMAC, 18, mac) // ETH_SS_STATS_ETH_MAC
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	return genetlink.Message{Header: genetlink.Header{Command: CmdStatsGetReply, Version: genlVersion}, Data: b}
}

// TestConstructedReply decodes the constructed reply into its counters,
// the eth-phy group's counter ignored, and keeps the file equal to the
// code that builds it (make generate RECORD=1 rewrites it).
func TestConstructedReply(t *testing.T) {
	msgs := checkConstructed(t, "stats-get-eth-mac-constructed.hex",
		"Constructed by constructedReply (ethtoolnl_test.go) as net/ethtool/stats.c fills a STATS_GET reply\nfor a driver that fills the eth-mac counters; make generate RECORD=1 rewrites it.",
		func(t testing.TB) []genetlink.Message { return []genetlink.Message{constructedReply(t)} })
	got, err := DecodeMAC(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != constructed {
		t.Errorf("decoded %+v, want %+v", got, constructed)
	}
}

// checkConstructed keeps the recording under replies equal to the
// replies build makes (make generate RECORD=1 rewrites it) and returns
// what the file holds.
func checkConstructed(t *testing.T, file, comment string, build func(testing.TB) []genetlink.Message) []genetlink.Message {
	t.Helper()
	path := filepath.Join(replies, file)
	if testenv.Recording() {
		testenv.Check(t, nltest.WriteGenl(path, comment, familyID, build(t)), "recording")
	}
	msgs, err := nltest.ReadGenl(path)
	if err != nil {
		t.Fatal(err)
	}
	want := build(t)
	if len(msgs) != len(want) {
		t.Fatalf("%s has %d messages, the code builds %d: make generate RECORD=1", path, len(msgs), len(want))
	}
	for i := range msgs {
		if !reflect.DeepEqual(msgs[i].Data, want[i].Data) {
			t.Fatalf("%s differs from the replies the code builds: make generate RECORD=1", path)
		}
	}
	return msgs
}

// liveDump dials the family and runs fetch as the exporter does: a
// kernel without the family (before 5.6) or older than major.minor must
// say unsupported (want, errors.ErrUnsupported), and ok is then false.
func liveDump[T any](t *testing.T, major, minor int, want error, fetch func(Decoded) ([]T, error)) (got []T, d Decoded, ok bool) {
	t.Helper()
	d, err := Dial()
	if testenv.KernelBefore(t, 5, 6) {
		if !errors.Is(err, ErrNoFamily) || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("Dial before 5.6: %v, want ErrNoFamily", err)
		}
		return nil, d, false
	}
	testenv.Check(t, err, "resolving the ethtool family")
	got, err = fetch(d)
	if testenv.KernelBefore(t, major, minor) {
		if !errors.Is(err, want) || !errors.Is(err, errors.ErrUnsupported) {
			t.Fatalf("before %d.%d: %v, want %v", major, minor, err, want)
		}
		return nil, d, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return got, d, true
}

// TestMACStatsLive dumps the running kernel's eth-mac group, as the
// exporter does: on a kernel before 5.13 the command is missing and says
// so; on later ones every device answers, a veth (no
// get_eth_mac_stats) with no counter.
func TestMACStatsLive(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	stats, d, ok := liveDump(t, 5, 13, ErrNoStats, Decoded.MACStats)
	if !ok {
		return
	}
	i := slices.IndexFunc(stats, func(m MAC) bool { return int(m.Ifindex) == pair.Host.Index })
	if i < 0 {
		t.Fatalf("the dump lacks %s (ifindex %d): %+v", pair.Host.Name, pair.Host.Index, stats)
	}
	if want := (MAC{Ifindex: uint32(pair.Host.Index), Name: pair.Host.Name}); stats[i] != want {
		t.Errorf("veth %s: %+v, want no counters", pair.Host.Name, stats[i])
	}
	if testenv.Capturing() {
		recordLo(t, d)
	}
}

// recordLo captures the running kernel's reply for lo.
func recordLo(t *testing.T, d Decoded) {
	msgs, err := d.Dump(CmdStatsGet, MACRequest())
	if err != nil {
		t.Fatal(err)
	}
	var lo []genetlink.Message
	for _, m := range msgs {
		if got, err := DecodeMAC([]genetlink.Message{m}); err == nil && got[0].Ifindex == 1 {
			lo = append(lo, m)
		}
	}
	var u unix.Utsname
	testenv.Check(t, unix.Uname(&u), "uname")
	comment := "Captured: the STATS_GET eth-mac reply for lo of Linux " + unix.ByteSliceToString(u.Release[:]) +
		"\n(make generate RECORD=capture): the group comes, with no counter."
	testenv.Check(t, nltest.WriteGenl(filepath.Join(replies, "stats-get-eth-mac.hex"), comment, familyID, lo), "recording")
}

// TestCapturedReply decodes the captured reply for lo: one device, the
// group without counters.
func TestCapturedReply(t *testing.T) {
	msgs, err := nltest.ReadGenl(filepath.Join(replies, "stats-get-eth-mac.hex"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeMAC(msgs)
	if err != nil {
		t.Fatal(err)
	}
	if want := []MAC{{Ifindex: 1, Name: "lo"}}; !reflect.DeepEqual(got, want) {
		t.Errorf("decoded %+v, want %+v", got, want)
	}
}

// FuzzDecode feeds recorded and mutated replies to every decoder:
// nothing panics, and a decode that succeeds has one value per message.
func FuzzDecode(f *testing.F) {
	seeds, err := nltest.ReadDir(replies)
	nltest.AddSeeds(f, seeds, err)
	f.Fuzz(func(t *testing.T, raw []byte) {
		msgs, ok := nltest.Genl(raw)
		if !ok {
			return
		}
		if got, err := DecodeMAC(msgs); err == nil && len(got) != len(msgs) {
			t.Fatalf("eth-mac: %d values from %d messages", len(got), len(msgs))
		}
		if got, err := DecodePause(msgs); err == nil && len(got) != len(msgs) {
			t.Fatalf("pause: %d values from %d messages", len(got), len(msgs))
		}
		if got, err := DecodeFEC(msgs); err == nil && len(got) != len(msgs) {
			t.Fatalf("fec: %d values from %d messages", len(got), len(msgs))
		}
	})
}

// BenchmarkMACStats is the ethtool collector's per-scrape cost of the
// eth-mac group of every device in the namespace.
func BenchmarkMACStats(b *testing.B) {
	d, err := Dial()
	if errors.Is(err, errors.ErrUnsupported) {
		b.Skip(err)
	}
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, err := d.MACStats(); err != nil {
			b.Fatal(err)
		}
	}
}
