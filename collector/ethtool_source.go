package collector

import (
	"errors"
	"fmt"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolnl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
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
	// The configuration calls: EOPNOTSUPP where the driver lacks them.
	LinkSettings(dev string) (ethtoolioctl.Link, error)
	Coalesce(dev string) (ethtool.Coalesce, error)
	PauseParam(dev string) (ethtool.Pause, error)
	RSS(dev string) (ethtoolioctl.RSS, error)
	HashFields(dev string, flowType uint32) (uint64, error)
	NtupleRules(dev string) (uint32, error)
	// PauseStats is the pause frame counters of every device (ethtool
	// netlink); errors.ErrUnsupported before Linux 5.12.
	PauseStats() ([]ethtoolnl.Pause, error)
	// FECStats is the FEC mode and block counters of every device
	// (ethtool netlink); errors.ErrUnsupported before Linux 5.14.
	FECStats() ([]ethtoolnl.FEC, error)
	// MACStats is the eth-mac group of every device (ethtool netlink);
	// errors.ErrUnsupported before Linux 5.13.
	MACStats() ([]ethtoolnl.MAC, error)
	// Qstats is the device-scope netdev qstats of every device;
	// errors.ErrUnsupported before Linux 6.9.
	Qstats() ([]netdev.Qstats, error)
	// LinkStats is the struct rtnl_link_stats64 of every device.
	LinkStats() ([]rtnl.LinkStats, error)
	Close() error
}

// kernelEthtool is the ethtoolSource of the running kernel: the ioctls of
// ethtoolioctl on the devices of the scrape's link snapshot, and one dump
// per scrape of each standard source.
type kernelEthtool struct {
	*ethtoolioctl.Conn
	// mac and qstats are the families' readers, nil where the kernel
	// has no family (dialErr says why).
	mac               ethtoolnl.Reader
	qstats            netdev.Reader
	macErr, qstatsErr error
}

func newKernelEthtool() (*kernelEthtool, error) {
	conn, err := ethtoolioctl.Open()
	if err != nil {
		return nil, err
	}
	k := &kernelEthtool{Conn: conn}
	if mac, err := ethtoolnl.Dial(); err == nil {
		k.mac = mac
	} else {
		k.macErr = err
	}
	if q, err := netdev.Dial(); err == nil {
		k.qstats = q
	} else {
		k.qstatsErr = err
	}
	return k, nil
}

func (k *kernelEthtool) MACStats() ([]ethtoolnl.MAC, error) {
	if k.mac == nil {
		return nil, k.macErr
	}
	return k.mac.MACStats()
}

func (k *kernelEthtool) PauseStats() ([]ethtoolnl.Pause, error) {
	if k.mac == nil {
		return nil, k.macErr
	}
	return k.mac.PauseStats()
}

func (k *kernelEthtool) FECStats() ([]ethtoolnl.FEC, error) {
	if k.mac == nil {
		return nil, k.macErr
	}
	return k.mac.FECStats()
}

// Qstats answers EOPNOTSUPP on kernels with the netdev family but without
// qstats-get (6.3 to 6.8): not supported there either.
func (k *kernelEthtool) Qstats() ([]netdev.Qstats, error) {
	if k.qstats == nil {
		return nil, k.qstatsErr
	}
	qs, err := k.qstats.Qstats(false)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return nil, fmt.Errorf("%w: the kernel has no netdev qstats-get (needs Linux 6.9 or later): %v", errors.ErrUnsupported, err)
	}
	return qs, err
}

func (k *kernelEthtool) LinkStats() ([]rtnl.LinkStats, error) { return rtnl.DumpStats64() }

func (k *kernelEthtool) Devices(snap *LinkSnapshot) ([]ethtoolDevice, error) {
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
