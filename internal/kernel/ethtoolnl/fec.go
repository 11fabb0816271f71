package ethtoolnl

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/genl"
)

// FEC is one device's FEC_GET reply with statistics asked for
// (net/ethtool/fec.c, Linux 5.14): the active FEC mode and the blocks the
// PHY corrected and could not correct. The kernel sends only the counters
// the driver filled; each is an array whose first element is the total,
// the rest per lane, and only the total is kept.
type FEC struct {
	Ifindex uint32
	Name    string
	// Active is the link mode bit of the FEC in use (ETHTOOL_LINK_MODE_FEC_*_BIT),
	// HasActive false where the driver does not say.
	Active                   uint32
	HasActive                bool
	HasCorrected, HasUncorr  bool
	Corrected, Uncorrectable uint64
}

// The FEC_GET attributes, transcribed from include/uapi/linux/ethtool_netlink.h
// (golang.org/x/sys has the command but not these).
const (
	CmdFECGet      = unix.ETHTOOL_MSG_FEC_GET // Linux 5.14
	aFECHeader     = 1                        // ETHTOOL_A_FEC_HEADER
	aFECActive     = 4                        // ETHTOOL_A_FEC_ACTIVE, u32 link mode bit
	aFECStats      = 5                        // ETHTOOL_A_FEC_STATS, nest
	aFECStatCorr   = 2                        // ETHTOOL_A_FEC_STAT_CORRECTED, u64 array
	aFECStatUncorr = 3                        // ETHTOOL_A_FEC_STAT_UNCORR, u64 array
)

// FECModeNames name the link mode bits of the FEC modes (enum
// ethtool_link_mode_bit_indices: FEC_NONE 49, FEC_RS 50, FEC_BASER 51,
// FEC_LLRS 74), as ethtool --show-fec names them.
var FECModeNames = map[uint32]string{49: "off", 50: "rs", 51: "baser", 74: "llrs"}

// ErrNoFEC is a kernel without FEC_GET (Linux 5.14): not supported here.
var ErrNoFEC = fmt.Errorf("%w: the kernel has no ethtool FEC_GET (needs Linux 5.14 or later)", errors.ErrUnsupported)

// FECStats dumps every device's FEC mode and counters; a device whose
// driver has no get_fecparam is left out by the kernel. errors.Is(err,
// ErrNoFEC) on kernels before 5.14, which have no such command (EOPNOTSUPP).
func (d Decoded) FECStats() ([]FEC, error) {
	return dump(d, CmdFECGet, statsRequest(aFECHeader), ErrNoFEC, "FEC statistics", DecodeFEC)
}

// DecodeFEC decodes the replies of a FEC_GET dump.
func DecodeFEC(msgs []genetlink.Message) ([]FEC, error) {
	out := make([]FEC, 0, len(msgs))
	err := genl.DecodeEach(msgs, "FEC_GET", func(ad *netlink.AttributeDecoder) error {
		var f FEC
		for ad.Next() {
			switch ad.Type() {
			case aFECHeader:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					decodeHeader(nad, &f.Ifindex, &f.Name)
					return nil
				})
			case aFECActive:
				f.Active, f.HasActive = ad.Uint32(), true
			case aFECStats:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						b := nad.Bytes()
						if len(b) < 8 {
							continue
						}
						total := binary.NativeEndian.Uint64(b)
						switch nad.Type() {
						case aFECStatCorr:
							f.Corrected, f.HasCorrected = total, true
						case aFECStatUncorr:
							f.Uncorrectable, f.HasUncorr = total, true
						}
					}
					return nil
				})
			}
		}
		out = append(out, f)
		return nil
	})
	return out, err
}
