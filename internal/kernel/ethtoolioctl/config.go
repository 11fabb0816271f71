package ethtoolioctl

import (
	"encoding/binary"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// The device configuration that explains what its queues do: the link
// (ETHTOOL_GSET), interrupt coalescing (ETHTOOL_GCOALESCE), pause
// settings (ETHTOOL_GPAUSEPARAM), the RSS indirection table and hash
// function (ETHTOOL_GRSSH), the header fields hashed per flow type
// (ETHTOOL_GRXFH) and the ntuple rule count (ETHTOOL_GRXCLSRLCNT). The
// structures and constants are include/uapi/linux/ethtool.h's; every
// call answers EOPNOTSUPP where the driver lacks its ethtool_ops member.

// Link is the part of ETHTOOL_GSET the exporter reports. The kernel
// answers it from the driver's get_link_ksettings on every kernel
// (net/ethtool/ioctl.c ethtool_get_settings), so the 32-bit legacy
// structure loses nothing here: speed is a u32 of Mb/s.
type Link struct {
	// SpeedMbps is the link speed in Mb/s; SpeedUnknown when the link is
	// down or the driver does not know it (veth reports 10000, virtio_net
	// what the host configured or unknown).
	SpeedMbps uint32
	// Duplex is DUPLEX_HALF (0), DUPLEX_FULL (1) or DUPLEX_UNKNOWN (0xff).
	Duplex  uint8
	Autoneg bool
}

// SpeedUnknown is SPEED_UNKNOWN as a u32.
const SpeedUnknown = ^uint32(0)

// LinkSettings is ETHTOOL_GSET.
func (k *Conn) LinkSettings(dev string) (Link, error) {
	v := ethtool.EthtoolCmd{Cmd: unix.ETHTOOL_GSET}
	if err := k.ioctl(dev, unsafe.Pointer(&v)); err != nil {
		return Link{}, err
	}
	return Link{SpeedMbps: uint32(v.Speed_hi)<<16 | uint32(v.Speed), Duplex: v.Duplex, Autoneg: v.Autoneg != 0}, nil
}

// Coalesce is ETHTOOL_GCOALESCE.
func (k *Conn) Coalesce(dev string) (ethtool.Coalesce, error) {
	v := ethtool.Coalesce{Cmd: unix.ETHTOOL_GCOALESCE}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v, err
}

// PauseParam is ETHTOOL_GPAUSEPARAM.
func (k *Conn) PauseParam(dev string) (ethtool.Pause, error) {
	v := ethtool.Pause{Cmd: unix.ETHTOOL_GPAUSEPARAM}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v, err
}

// RSS is a device's receive-side scaling: the hash function and the
// indirection table, entry i the RX queue a hash whose low bits are i
// goes to.
type RSS struct {
	// HashFunc is the bit set of enum ETH_RSS_HASH_*_BIT in use (one bit
	// on every driver; 0 where the driver does not say).
	HashFunc uint8
	Indir    []uint32
}

// HashFuncNames are the names the kernel gives ETH_RSS_HASH_*_BIT, bit i
// named by entry i (rss_hash_func_strings, net/ethtool/common.c).
var HashFuncNames = [...]string{"toeplitz", "xor", "crc32"}

// RSS is ETHTOOL_GRSSH, twice: the first call, with no room for a table,
// returns the table's size; the second reads it. The kernel answers
// EINVAL when the size asked for is not the device's, so a table that
// changed size in between is an error, never a short read.
func (k *Conn) RSS(dev string) (RSS, error) {
	const hdr = 24 // struct ethtool_rxfh up to rss_config
	head := make([]byte, hdr)
	binary.NativeEndian.PutUint32(head[0:], unix.ETHTOOL_GRSSH)
	if err := k.ioctl(dev, unsafe.Pointer(&head[0])); err != nil {
		return RSS{}, err
	}
	n := binary.NativeEndian.Uint32(head[8:])
	rss := RSS{HashFunc: head[16]}
	if n == 0 {
		return rss, nil
	}
	buf := make([]byte, hdr+4*int(n))
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GRSSH)
	binary.NativeEndian.PutUint32(buf[8:], n)
	if err := k.ioctl(dev, unsafe.Pointer(&buf[0])); err != nil {
		return RSS{}, err
	}
	rss.HashFunc = buf[16]
	rss.Indir = make([]uint32, n)
	for i := range rss.Indir {
		rss.Indir[i] = binary.NativeEndian.Uint32(buf[hdr+4*i:])
	}
	return rss, nil
}

// Flow types whose hash fields the exporter reads (TCP_V4_FLOW, ...).
const (
	FlowTCP4 = 0x01
	FlowUDP4 = 0x02
	FlowTCP6 = 0x05
	FlowUDP6 = 0x06
)

// HashFields is ETHTOOL_GRXFH for one flow type: the RXH_* bits of the
// header fields the NIC hashes for it. The kernel copies only cmd,
// flow_type and data for this command (ethtool_rxnfc_copy_struct), the
// structure's original definition.
func (k *Conn) HashFields(dev string, flowType uint32) (uint64, error) {
	v := struct {
		cmd, flowType uint32
		data          uint64
	}{cmd: unix.ETHTOOL_GRXFH, flowType: flowType}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v.data, err
}

// HashFieldLetters names the RXH_* bits as ethtool -n DEV rx-flow-hash
// and -N take them: bit 1 << i is letter i, "" for bits without one.
var HashFieldLetters = [...]string{1: "m", 2: "v", 3: "t", 4: "s", 5: "d", 6: "f", 7: "n"}

// NtupleRules is ETHTOOL_GRXCLSRLCNT: how many ntuple (flow steering)
// rules the device holds.
func (k *Conn) NtupleRules(dev string) (uint32, error) {
	const size, ruleCnt = 192, 184 // sizeof(struct ethtool_rxnfc), offsetof rule_cnt
	buf := make([]byte, size)
	binary.NativeEndian.PutUint32(buf[0:], unix.ETHTOOL_GRXCLSRLCNT)
	if err := k.ioctl(dev, unsafe.Pointer(&buf[0])); err != nil {
		return 0, err
	}
	return binary.NativeEndian.Uint32(buf[ruleCnt:]), nil
}
