package ethtoolnl

import (
	"errors"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/genl"
)

// Pause is one device's PAUSE_GET reply with statistics asked for
// (net/ethtool/pause.c): the pause settings and the pause frames the
// port sent and received. The kernel sends only the counters the driver
// filled (ETHTOOL_STAT_NOT_SET is skipped), none for a driver without
// get_pause_stats.
type Pause struct {
	Ifindex                  uint32
	Name                     string
	Autoneg, RX, TX          bool
	HasTXFrames, HasRXFrames bool
	TXFrames, RXFrames       uint64
}

// ErrNoPauseStats is a kernel whose PAUSE_GET refuses the statistics flag
// (ETHTOOL_FLAG_STATS, Linux 5.12): not supported here.
var ErrNoPauseStats = fmt.Errorf("%w: the kernel's ethtool PAUSE_GET has no statistics (needs Linux 5.12 or later)", errors.ErrUnsupported)

// CmdPauseGet is ETHTOOL_MSG_PAUSE_GET (Linux 5.6).
const CmdPauseGet = unix.ETHTOOL_MSG_PAUSE_GET

// PauseStats dumps every device's pause settings and counters; devices
// whose driver has no get_pauseparam are left out of the dump by the
// kernel. errors.Is(err, ErrNoPauseStats) on kernels before 5.12, which
// refuse the flag with EOPNOTSUPP ("unrecognized request flags").
func (d Decoded) PauseStats() ([]Pause, error) {
	return dump(d, CmdPauseGet, statsRequest(unix.ETHTOOL_A_PAUSE_HEADER), ErrNoPauseStats, "pause statistics", DecodePause)
}

// DecodePause decodes the replies of a PAUSE_GET dump.
func DecodePause(msgs []genetlink.Message) ([]Pause, error) {
	out := make([]Pause, 0, len(msgs))
	err := genl.DecodeEach(msgs, "PAUSE_GET", func(ad *netlink.AttributeDecoder) error {
		var p Pause
		for ad.Next() {
			switch ad.Type() {
			case unix.ETHTOOL_A_PAUSE_HEADER:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					decodeHeader(nad, &p.Ifindex, &p.Name)
					return nil
				})
			case unix.ETHTOOL_A_PAUSE_AUTONEG:
				p.Autoneg = ad.Uint8() != 0
			case unix.ETHTOOL_A_PAUSE_RX:
				p.RX = ad.Uint8() != 0
			case unix.ETHTOOL_A_PAUSE_TX:
				p.TX = ad.Uint8() != 0
			case unix.ETHTOOL_A_PAUSE_STATS:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						switch nad.Type() {
						case unix.ETHTOOL_A_PAUSE_STAT_TX_FRAMES:
							p.TXFrames, p.HasTXFrames = nad.Uint64(), true
						case unix.ETHTOOL_A_PAUSE_STAT_RX_FRAMES:
							p.RXFrames, p.HasRXFrames = nad.Uint64(), true
						}
					}
					return nil
				})
			}
		}
		out = append(out, p)
		return nil
	})
	return out, err
}
