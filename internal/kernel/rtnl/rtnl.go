// Package rtnl speaks rtnetlink (NETLINK_ROUTE) for what the exporter
// needs of it: one dump of the namespace's links with their XDP programs
// per mode, one dump of their struct rtnl_link_stats64 (stats.go), and
// detaching the XDP programs of a device.
package rtnl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

// Link is one network device as RTM_GETLINK reports it.
type Link struct {
	Index uint32
	// Name is the kernel's bytes: any byte but '/', ':' and white space.
	Name string
	// RxQueues is IFLA_NUM_RX_QUEUES: the RX queues the device was made
	// with, an upper bound of the ones in use.
	RxQueues uint32
	// Kind is IFLA_INFO_KIND: the device's driver as ip link add names it
	// (veth, netkit, bond), empty for a physical device.
	Kind string
	XDP  []XDPProg
}

// XDPProg is the program of one XDP mode (native, generic, offload).
type XDPProg struct {
	Mode   string
	ProgID uint32
}

// ErrDumpInterrupted is a dump that link changes kept interrupting: the
// list Dump returns with it may miss or repeat devices.
var ErrDumpInterrupted = errors.New("interrupted by link changes")

// xdpModes maps the per-mode program id attributes of IFLA_XDP to the
// exporter's mode names (those of --collector.rxq.mode).
var xdpModes = []struct {
	attr uint16
	name string
}{
	{unix.IFLA_XDP_DRV_PROG_ID, "native"},
	{unix.IFLA_XDP_SKB_PROG_ID, "generic"},
	{unix.IFLA_XDP_HW_PROG_ID, "offload"},
}

// Dump dumps the links of the current network namespace. The XDP
// programs are read per mode because a device may hold a program in more
// than one mode at once (XDP_ATTACHED_MULTI, offload next to native or
// generic), in which case the kernel omits IFLA_XDP_PROG_ID.
func Dump() ([]Link, error) {
	// Without the link statistics (IFLA_STATS, IFLA_STATS64) each message
	// is about half the size; DumpStats64 reads them for the collectors
	// that need them, only the 64-bit set.
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(unix.IFLA_EXT_MASK, rtextFilterSkipStats)
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	req := netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETLINK, Flags: netlink.Request | netlink.Dump},
		Data:   append(ifinfomsg(unix.AF_UNSPEC, 0), attrs...),
	}
	return dumpAll("dumping links (RTM_GETLINK)", req, unix.RTM_NEWLINK, ParseLink, func(l Link) uint32 { return l.Index })
}

// dumpAll runs a dump request on a route socket of its own and parses
// every reply of type want, once per device: a dump that link changes
// kept interrupting may repeat devices.
func dumpAll[T any](what string, req netlink.Message, want netlink.HeaderType, parse func([]byte) (T, error), index func(T) uint32) ([]T, error) {
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return nil, fmt.Errorf("%s: opening a route netlink socket: %w", what, err)
	}
	defer conn.Close()
	msgs, interrupted, err := execute(conn, req)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	out := make([]T, 0, len(msgs))
	seen := make(map[uint32]bool, len(msgs))
	for _, m := range msgs {
		if m.Header.Type != want {
			continue
		}
		v, err := parse(m.Data)
		if err != nil {
			return nil, err
		}
		if i := index(v); !seen[i] {
			seen[i] = true
			out = append(out, v)
		}
	}
	if interrupted {
		return out, fmt.Errorf("%s: %w 10 times in a row (NLM_F_DUMP_INTR)", what, ErrDumpInterrupted)
	}
	return out, nil
}

// execute runs a dump, again while a concurrent link change interrupts
// it (NLM_F_DUMP_INTR): such a dump may miss or repeat devices. A dump
// takes well under a millisecond, and with interfaces churning
// (containers starting) three tries in a row were seen interrupted.
func execute(conn *netlink.Conn, req netlink.Message) (msgs []netlink.Message, interrupted bool, err error) {
	for range 10 {
		if msgs, err = conn.Execute(req); err != nil {
			return nil, false, err
		}
		interrupted = slices.ContainsFunc(msgs, func(m netlink.Message) bool { return m.Header.Flags&netlink.DumpInterrupted != 0 })
		if !interrupted {
			break
		}
	}
	return msgs, interrupted, nil
}

// ifinfomsg is struct ifinfomsg (include/uapi/linux/rtnetlink.h) of a
// request about device index (0: all), in host byte order as netlink
// wants it.
func ifinfomsg(family uint8, index int32) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	b[0] = family
	binary.NativeEndian.PutUint32(b[4:8], uint32(index))
	return b
}

// rtextFilterSkipStats is RTEXT_FILTER_SKIP_STATS of
// include/uapi/linux/rtnetlink.h (Linux 4.18; older kernels ignore it).
const rtextFilterSkipStats = 1 << 3

// ParseLink decodes one RTM_NEWLINK message: struct ifinfomsg, then the
// attributes, walked in place.
func ParseLink(m []byte) (Link, error) {
	if len(m) < unix.SizeofIfInfomsg {
		return Link{}, fmt.Errorf("RTM_NEWLINK message of %d bytes is shorter than ifinfomsg", len(m))
	}
	index := int32(binary.NativeEndian.Uint32(m[4:8]))
	l := Link{Index: uint32(index)}
	err := nlattr.Decode(m[unix.SizeofIfInfomsg:], func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			switch ad.Type() {
			case unix.IFLA_IFNAME:
				l.Name = ad.String()
			case unix.IFLA_NUM_RX_QUEUES:
				l.RxQueues = ad.Uint32()
			case unix.IFLA_LINKINFO:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						if nad.Type() == unix.IFLA_INFO_KIND {
							l.Kind = nad.String()
						}
					}
					return nil
				})
			case unix.IFLA_XDP:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						for _, mode := range xdpModes {
							if nad.Type() == mode.attr && len(nad.Bytes()) >= 4 {
								if id := nad.Uint32(); id != 0 {
									l.XDP = append(l.XDP, XDPProg{Mode: mode.name, ProgID: id})
								}
							}
						}
					}
					return nil
				})
			}
		}
		return nil
	})
	if err != nil {
		return l, fmt.Errorf("parsing link %d attributes: %w", index, err)
	}
	return l, nil
}

// DetachXDP removes the XDP program of ifindex in every mode, as `ip link
// set DEV xdp off` does for each. Removing from a mode with nothing
// attached succeeds; a mode the device does not support fails and has
// nothing to remove, so those errors are not returned.
func DetachXDP(ifindex uint32) error {
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return fmt.Errorf("opening a route netlink socket: %w", err)
	}
	defer conn.Close()
	for _, mode := range []uint32{unix.XDP_FLAGS_DRV_MODE, unix.XDP_FLAGS_SKB_MODE, unix.XDP_FLAGS_HW_MODE} {
		_ = setXDPFd(conn, ifindex, -1, mode)
	}
	return nil
}

// setXDPFd is `ip link set DEV xdp fd FD` in one mode: RTM_SETLINK with
// IFLA_XDP holding IFLA_XDP_FD and IFLA_XDP_FLAGS (fd -1 detaches).
func setXDPFd(conn *netlink.Conn, ifindex uint32, fd int32, mode uint32) error {
	ae := netlink.NewAttributeEncoder()
	ae.Nested(unix.IFLA_XDP, func(nae *netlink.AttributeEncoder) error {
		nae.Int32(unix.IFLA_XDP_FD, fd)
		nae.Uint32(unix.IFLA_XDP_FLAGS, mode)
		return nil
	})
	attrs, err := ae.Encode()
	if err != nil {
		return err
	}
	_, err = conn.Execute(netlink.Message{
		Header: netlink.Header{Type: unix.RTM_SETLINK, Flags: netlink.Request | netlink.Acknowledge},
		Data:   append(ifinfomsg(unix.AF_UNSPEC, int32(ifindex)), attrs...),
	})
	return err
}

// OwnNetns is the inode of the calling process's network namespace, which
// BPF programs record with every device (net->ns.inum).
func OwnNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("reading the exporter's network namespace: %w", err)
	}
	return st.Ino, nil
}
