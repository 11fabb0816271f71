// Package ethtoolnl reads the standard statistics of the kernel's
// "ethtool" generic netlink family: the IEEE 802.3 MAC statistics
// (ethtool -S DEV --groups eth-mac) and the pause frame counters
// (ethtool -I --show-pause DEV) and the FEC counters (ethtool -I
// --show-fec DEV), counters every driver that implements
// them names the same way, where ethtool -S names are the driver's own.
//
// It is written by hand on mdlayher/genetlink: mdlayher/ethtool (v0.7.0)
// has no ETHTOOL_MSG_STATS_GET and no pause or FEC statistics. The command, attribute ids and enums are
// transcribed from include/uapi/linux/ethtool_netlink.h (Linux 5.13, where
// the standard statistics began; the kernel only appends to them) and
// the replies are built by net/ethtool/stats.c.
package ethtoolnl

import (
	"errors"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/genl"
)

// FamilyName is the generic netlink family (Linux 5.6).
const FamilyName = "ethtool"

// Commands and the family version (ETHTOOL_GENL_VERSION).
const (
	CmdStatsGet      = unix.ETHTOOL_MSG_STATS_GET       // 32, Linux 5.13
	CmdStatsGetReply = unix.ETHTOOL_MSG_STATS_GET_REPLY // 33
	genlVersion      = 1
)

// Attributes of a STATS_GET request and reply, and of the nests in them.
const (
	aHeader        = 2 // ETHTOOL_A_STATS_HEADER, nest of ETHTOOL_A_HEADER_*
	aGroups        = 3 // ETHTOOL_A_STATS_GROUPS, bitset of enum ETHTOOL_STATS_*
	aGroup         = 4 // ETHTOOL_A_STATS_GRP, nest: one per group asked for
	aHeaderIfindex = 1 // ETHTOOL_A_HEADER_DEV_INDEX, u32
	aHeaderName    = 2 // ETHTOOL_A_HEADER_DEV_NAME, string
	aGroupID       = 2 // ETHTOOL_A_STATS_GRP_ID, u32
	aGroupStat     = 4 // ETHTOOL_A_STATS_GRP_STAT, nest of one u64 whose type is the statistic's id
	groupEthMAC    = 1 // ETHTOOL_STATS_ETH_MAC
	groupCount     = 2 // groups up to eth-mac: the bitset size every kernel since 5.13 accepts
)

// MACStatNames are enum ETHTOOL_A_STATS_ETH_MAC_*: the ids the kernel
// gives the counters of struct ethtool_eth_mac_stats (IEEE 802.3 clause
// 30 names), id i named by entry i.
var MACStatNames = [...]string{
	"FramesTransmittedOK", "SingleCollisionFrames", "MultipleCollisionFrames", "FramesReceivedOK",
	"FrameCheckSequenceErrors", "AlignmentErrors", "OctetsTransmittedOK", "FramesWithDeferredXmissions",
	"LateCollisions", "FramesAbortedDueToXSColls", "FramesLostDueToIntMACXmitError", "CarrierSenseErrors",
	"OctetsReceivedOK", "FramesLostDueToIntMACRcvError", "MulticastFramesXmittedOK", "BroadcastFramesXmittedOK",
	"FramesWithExcessiveDeferral", "MulticastFramesReceivedOK", "BroadcastFramesReceivedOK", "InRangeLengthErrors",
	"OutOfRangeLengthField", "FrameTooLongErrors",
}

// The MAC counters the exporter reads, by id.
const (
	FramesTransmittedOK = 0
	FramesReceivedOK    = 3
	OctetsTransmittedOK = 6
	OctetsReceivedOK    = 12
)

// MAC is one device's eth-mac group. The kernel sends only the counters
// the driver filled (net/ethtool/stats.c skips ETHTOOL_STAT_NOT_SET), and
// the group, empty, for a driver without get_eth_mac_stats.
type MAC struct {
	Ifindex uint32
	Name    string
	Present [len(MACStatNames)]bool
	Values  [len(MACStatNames)]uint64
}

// Errors of kernels without the family or the command: not supported
// here (errors.ErrUnsupported).
var (
	ErrNoFamily = fmt.Errorf(`%w: the kernel has no "ethtool" generic netlink family (needs Linux 5.6 or later)`, errors.ErrUnsupported)
	ErrNoStats  = fmt.Errorf("%w: the kernel has no ETHTOOL_MSG_STATS_GET (needs Linux 5.13 or later)", errors.ErrUnsupported)
)

// Source runs one dump request and returns its replies. genl.Family is
// the kernel's; tests replay recorded replies.
type Source interface {
	Dump(cmd uint8, attrs []byte) ([]genetlink.Message, error)
	Close() error
}

// Dial resolves the family and returns the kernel's Reader, a socket per
// dump; errors.Is(err, ErrNoFamily) where the kernel has none.
func Dial() (Decoded, error) {
	f, err := genl.Resolve(FamilyName, genlVersion, ErrNoFamily)
	if err != nil {
		return Decoded{}, err
	}
	return Decoded{f}, nil
}

// Reader is what the collectors ask of the family.
type Reader interface {
	// MACStats is the eth-mac group of every device.
	MACStats() ([]MAC, error)
	// PauseStats is the pause frame counters of every device whose
	// driver reports its pause settings.
	PauseStats() ([]Pause, error)
	// FECStats is the FEC mode and block counters of every device whose
	// driver reports its FEC settings.
	FECStats() ([]FEC, error)
	Close() error
}

// Decoded reads a Source's replies: the kernel's (a genl.Family) or
// recorded ones.
type Decoded struct{ Source }

// MACStats dumps the eth-mac group of every device; errors.Is(err,
// ErrNoStats) on kernels before 5.13, which answer EOPNOTSUPP.
func (d Decoded) MACStats() ([]MAC, error) {
	return dump(d, CmdStatsGet, MACRequest(), ErrNoStats, "eth-mac statistics", DecodeMAC)
}

// dump runs one dump request and decodes its replies; EOPNOTSUPP, what a
// kernel without the command or the flags answers, is unsupported.
func dump[T any](d Decoded, cmd uint8, req []byte, unsupported error, what string, decode func([]genetlink.Message) ([]T, error)) ([]T, error) {
	msgs, err := d.Dump(cmd, req)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return nil, fmt.Errorf("%w (%v)", unsupported, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dumping ethtool %s: %w", what, err)
	}
	return decode(msgs)
}

// statsRequest is the attributes of a dump asking for a command's
// statistics: its header attribute with ETHTOOL_FLAG_STATS alone.
func statsRequest(header uint16) []byte {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(header, func(nae *netlink.AttributeEncoder) error {
		nae.Uint32(unix.ETHTOOL_A_HEADER_FLAGS, unix.ETHTOOL_FLAG_STATS)
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		panic(err) // fixed attributes always encode
	}
	return b
}

// MACRequest is the attributes of a STATS_GET asking for the eth-mac group
// alone: a compact bitset (ETHTOOL_A_BITSET_NOMASK, _SIZE, _VALUE) of
// groupCount bits with ETHTOOL_STATS_ETH_MAC set. Without a source
// (ETHTOOL_A_STATS_SRC, Linux 6.4) the kernel reports the aggregate of
// the express and preemptible MACs.
func MACRequest() []byte {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(aHeader, func(*netlink.AttributeEncoder) error { return nil })
	ae.Nested(aGroups, func(nae *netlink.AttributeEncoder) error {
		nae.Flag(unix.ETHTOOL_A_BITSET_NOMASK, true)
		nae.Uint32(unix.ETHTOOL_A_BITSET_SIZE, groupCount)
		nae.Uint32(unix.ETHTOOL_A_BITSET_VALUE, 1<<groupEthMAC)
		return nil
	})
	b, err := ae.Encode()
	if err != nil {
		panic(err) // fixed attributes always encode
	}
	return b
}

// DecodeMAC decodes the replies of a STATS_GET dump; a reply without the
// eth-mac group (another group asked for) gives an empty MAC.
func DecodeMAC(msgs []genetlink.Message) ([]MAC, error) {
	out := make([]MAC, 0, len(msgs))
	err := genl.DecodeEach(msgs, "STATS_GET", func(ad *netlink.AttributeDecoder) error {
		var s MAC
		for ad.Next() {
			switch ad.Type() {
			case aHeader:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					decodeHeader(nad, &s.Ifindex, &s.Name)
					return nil
				})
			case aGroup:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					return decodeGroup(nad, &s)
				})
			}
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

func decodeHeader(ad *netlink.AttributeDecoder, ifindex *uint32, name *string) {
	for ad.Next() {
		switch ad.Type() {
		case aHeaderIfindex:
			*ifindex = ad.Uint32()
		case aHeaderName:
			*name = ad.String()
		}
	}
}

// decodeGroup reads one ETHTOOL_A_STATS_GRP: its id, then one
// ETHTOOL_A_STATS_GRP_STAT nest per counter the driver filled. The id
// comes first (stats_put_stats), so counters of other groups are skipped.
func decodeGroup(ad *netlink.AttributeDecoder, s *MAC) error {
	mac := false
	for ad.Next() {
		switch ad.Type() {
		case aGroupID:
			mac = ad.Uint32() == groupEthMAC
		case aGroupStat:
			if !mac {
				continue
			}
			ad.Nested(func(nad *netlink.AttributeDecoder) error {
				for nad.Next() {
					if id := int(nad.Type()); id < len(s.Values) {
						s.Values[id] = nad.Uint64()
						s.Present[id] = true
					}
				}
				return nil
			})
		}
	}
	return nil
}
