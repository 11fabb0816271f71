package ethtoolnl

import (
	"encoding/binary"
	"testing"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// constructedFEC are the devices of the constructed FEC_GET replies: an
// mlx5 port on RS-FEC whose driver counts corrected and uncorrectable
// blocks on four lanes (mlx5e_stats_fec_get), and a port whose driver
// reports its mode but no counters (empty arrays: fec_stats_recalc with
// ETHTOOL_STAT_NOT_SET).
var constructedFEC = []FEC{
	{Ifindex: 6, Name: "mlx5p1", Active: 50, HasActive: true, HasCorrected: true, HasUncorr: true, Corrected: 1_000 + 200 + 30 + 4, Uncorrectable: 5},
	{Ifindex: 7, Name: "ice0", Active: 49, HasActive: true},
}

// constructedFECLanes are the mlx5 port's per-lane counts after the totals.
var constructedFECLanes = [][]uint64{{1000, 200, 30, 4}, {5, 0, 0, 0}}

// constructedFECReplies are fec_fill_reply's messages for constructedFEC
// (net/ethtool/fec.c): the header, FEC_AUTO, FEC_ACTIVE, and the
// statistics nest of three u64 arrays, total first, each 64-bit
// attribute padded with ETHTOOL_A_FEC_STAT_PAD.
func constructedFECReplies(t testing.TB) []genetlink.Message {
	array := func(vals ...uint64) []byte {
		b := make([]byte, 8*len(vals))
		for i, v := range vals {
			binary.NativeEndian.PutUint64(b[8*i:], v)
		}
		return b
	}
	var msgs []genetlink.Message
	for _, f := range constructedFEC {
		ae := netlink.NewAttributeEncoder()
		ae.Nested(aFECHeader, func(nae *netlink.AttributeEncoder) error {
			nae.Uint32(aHeaderIfindex, f.Ifindex)
			nae.String(aHeaderName, f.Name)
			return nil
		})
		ae.Uint8(3, 0) // ETHTOOL_A_FEC_AUTO
		ae.Uint32(aFECActive, f.Active)
		ae.Nested(aFECStats, func(nae *netlink.AttributeEncoder) error {
			var corr, uncorr []byte
			if f.HasCorrected {
				corr = array(append([]uint64{f.Corrected}, constructedFECLanes[0]...)...)
				uncorr = array(append([]uint64{f.Uncorrectable}, constructedFECLanes[1]...)...)
			}
			for _, a := range []struct {
				typ uint16
				b   []byte
			}{{aFECStatCorr, corr}, {aFECStatUncorr, uncorr}, {4, nil}} {
				nae.Bytes(1, nil) // ETHTOOL_A_FEC_STAT_PAD
				nae.Bytes(a.typ, a.b)
			}
			return nil
		})
		b, err := ae.Encode()
		if err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, genetlink.Message{Header: genetlink.Header{Command: unix.ETHTOOL_MSG_FEC_GET_REPLY, Version: genlVersion}, Data: b})
	}
	return msgs
}
