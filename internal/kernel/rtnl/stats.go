package rtnl

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

// Stats64Names are the fields of struct rtnl_link_stats64
// (include/uapi/linux/if_link.h) in order. Kernels before 6.0 send the
// first 24 (no rx_otherhost_dropped); a field a kernel does not send is
// absent, not zero.
var Stats64Names = [...]string{
	"rx_packets", "tx_packets", "rx_bytes", "tx_bytes",
	"rx_errors", "tx_errors", "rx_dropped", "tx_dropped",
	"multicast", "collisions",
	"rx_length_errors", "rx_over_errors", "rx_crc_errors", "rx_frame_errors",
	"rx_fifo_errors", "rx_missed_errors",
	"tx_aborted_errors", "tx_carrier_errors", "tx_fifo_errors", "tx_heartbeat_errors", "tx_window_errors",
	"rx_compressed", "tx_compressed", "rx_nohandler", "rx_otherhost_dropped",
}

// LinkStats is one device's struct rtnl_link_stats64 (ip -s link).
type LinkStats struct {
	Index uint32
	// N is how many of Stats64Names the kernel sent.
	N      int
	Values [len(Stats64Names)]uint64
}

// Field returns the value of the named field of Stats64Names, false when
// the name is not one or the kernel did not send it.
func (s LinkStats) Field(name string) (uint64, bool) {
	for i, n := range Stats64Names[:s.N] {
		if n == name {
			return s.Values[i], true
		}
	}
	return 0, false
}

// DumpStats64 dumps the struct rtnl_link_stats64 of every device of the
// current network namespace: RTM_GETSTATS with only IFLA_STATS_LINK_64
// requested (Linux 4.7), the counters `ip -s link` shows, computed by each
// driver's ndo_get_stats64 at the time of the dump. Unprivileged.
func DumpStats64() ([]LinkStats, error) {
	req := netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETSTATS, Flags: netlink.Request | netlink.Dump},
		Data:   StatsRequest(0),
	}
	return dumpAll("dumping link statistics (RTM_GETSTATS)", req, unix.RTM_NEWSTATS, ParseStats, func(s LinkStats) uint32 { return s.Index })
}

// sizeofIfStatsMsg is struct if_stats_msg of include/uapi/linux/if_link.h:
// family, two pads, ifindex, filter_mask.
const sizeofIfStatsMsg = 12

// StatsRequest is the struct if_stats_msg of an RTM_GETSTATS request for
// ifindex (0 in a dump) asking for IFLA_STATS_LINK_64 alone
// (filter_mask IFLA_STATS_FILTER_BIT(IFLA_STATS_LINK_64)).
func StatsRequest(ifindex uint32) []byte {
	b := make([]byte, sizeofIfStatsMsg)
	b[0] = unix.AF_UNSPEC
	binary.NativeEndian.PutUint32(b[4:8], ifindex)
	binary.NativeEndian.PutUint32(b[8:12], 1<<(unix.IFLA_STATS_LINK_64-1))
	return b
}

// ParseStats decodes one RTM_NEWSTATS message: struct if_stats_msg, then
// IFLA_STATS_LINK_64 (the kernel may put an IFLA_STATS_UNSPEC pad before
// it to align the 64-bit counters).
func ParseStats(m []byte) (LinkStats, error) {
	if len(m) < sizeofIfStatsMsg {
		return LinkStats{}, fmt.Errorf("RTM_NEWSTATS message of %d bytes is shorter than if_stats_msg", len(m))
	}
	s := LinkStats{Index: binary.NativeEndian.Uint32(m[4:8])}
	err := nlattr.Decode(m[sizeofIfStatsMsg:], func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			if ad.Type() != unix.IFLA_STATS_LINK_64 {
				continue
			}
			b := ad.Bytes()
			s.N = min(len(b)/8, len(s.Values))
			for i := range s.N {
				s.Values[i] = binary.NativeEndian.Uint64(b[8*i:])
			}
		}
		return nil
	})
	if err != nil {
		return s, fmt.Errorf("parsing the statistics of link %d: %w", s.Index, err)
	}
	return s, nil
}
