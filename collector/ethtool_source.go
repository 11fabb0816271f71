package collector

import (
	"github.com/safchain/ethtool"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
)

// ethtoolDevice is one interface the source can query.
type ethtoolDevice struct {
	Name, Label string // as in Link
	Index       int
}

// ethtoolSource is everything the collector asks of the kernel. The
// kernel implementation issues one ioctl per call (ethtoolioctl); the
// fixture source in the tests answers from captured `ethtool` output.
type ethtoolSource interface {
	// Devices lists the devices of the scrape's link snapshot.
	Devices(links *LinkSnapshot) ([]ethtoolDevice, error)
	DriverInfo(dev string) (ethtoolioctl.DriverInfo, error)
	// StatNames returns the ETH_SS_STATS strings in driver order.
	StatNames(dev string, n int) ([]string, error)
	// Stats reads the n stat values into dst (reusing its storage) and
	// returns ethtoolioctl.ErrStatsChanged when the driver now has a different count.
	Stats(dev string, n int, dst []uint64) ([]uint64, error)
	Channels(dev string) (ethtool.Channels, error)
	Ring(dev string) (ethtool.Ring, error)
	// PrivFlagNames returns the private flag names indexed by bit.
	PrivFlagNames(dev string) ([]string, error)
	PrivFlags(dev string) (uint32, error)
	Close() error
}

// kernelEthtool is the ethtoolSource of the running kernel: the ioctls of
// ethtoolioctl on the devices of the scrape's link snapshot.
type kernelEthtool struct{ *ethtoolioctl.Conn }

func newKernelEthtool() (kernelEthtool, error) {
	conn, err := ethtoolioctl.Open()
	return kernelEthtool{conn}, err
}

func (k kernelEthtool) Devices(snap *LinkSnapshot) ([]ethtoolDevice, error) {
	links, err := snap.Get()
	if links == nil {
		return nil, err
	}
	out := make([]ethtoolDevice, len(links.All()))
	for i, l := range links.All() {
		out[i] = ethtoolDevice{Name: l.Name, Label: l.Label, Index: int(l.Index)}
	}
	return out, err
}
