// Package xskdiag dumps the AF_XDP sockets of the caller's network
// namespace through sock_diag (NETLINK_SOCK_DIAG, net/xdp/xsk_diag.c): each
// socket's device, queue, ring sizes and drop counters. No Go library
// decodes it, so the structures are read by hand.
package xskdiag

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

// The AF_XDP sock_diag interface, include/uapi/linux/xdp_diag.h.
const (
	SockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY, include/uapi/linux/sock_diag.h

	ShowInfo    = 1 << 0 // XDP_SHOW_INFO
	ShowRingCfg = 1 << 1 // XDP_SHOW_RING_CFG
	ShowUmem    = 1 << 2 // XDP_SHOW_UMEM
	ShowStats   = 1 << 4 // XDP_SHOW_STATS

	DiagInfo           = 1 // XDP_DIAG_INFO: struct xdp_diag_info
	DiagRxRing         = 3 // XDP_DIAG_RX_RING: struct xdp_diag_ring
	DiagTxRing         = 4 // XDP_DIAG_TX_RING
	DiagFillRing       = 6 // XDP_DIAG_UMEM_FILL_RING
	DiagCompletionRing = 7 // XDP_DIAG_UMEM_COMPLETION_RING
	DiagStats          = 9 // XDP_DIAG_STATS: struct xdp_diag_stats

	ReqLen   = 20 // sizeof(struct xdp_diag_req)
	MsgLen   = 16 // sizeof(struct xdp_diag_msg)
	InfoLen  = 8  // sizeof(struct xdp_diag_info)
	StatsLen = 48 // sizeof(struct xdp_diag_stats)
)

// NumStats is the number of u64 counters in struct xdp_diag_stats.
const NumStats = StatsLen / 8

// RingNames names the rings sock_diag reports the size of, by attribute.
var RingNames = map[uint16]string{
	DiagRxRing: "rx", DiagTxRing: "tx", DiagFillRing: "fill", DiagCompletionRing: "completion",
}

// Socket is one AF_XDP socket as sock_diag reports it.
type Socket struct {
	Inode    uint32
	Ifindex  uint32
	Queue    uint32
	HasInfo  bool // bound to a device and queue
	Stats    [NumStats]uint64
	HasStats bool
	Rings    map[string]uint32 // ring -> entries
}

// Source dumps every AF_XDP socket's diag message: the kernel (Conn), or
// recorded replies in tests.
type Source interface {
	Dump() ([]netlink.Message, error)
	Close() error
}

// ErrNotSupported is a kernel without AF_XDP socket diag: not supported
// here (errors.ErrUnsupported).
var ErrNotSupported = fmt.Errorf("%w: the kernel has no AF_XDP socket diag (needs CONFIG_XDP_SOCKETS_DIAG / module xsk_diag)", errors.ErrUnsupported)

// Conn is the kernel's Source: a sock_diag netlink socket.
type Conn struct{ conn *netlink.Conn }

// Dial opens a sock_diag socket, the kernel's Reader, and runs one dump to
// find out whether the kernel answers for AF_XDP: without
// CONFIG_XDP_SOCKETS_DIAG it answers ENOENT, and errors.Is(err,
// ErrNotSupported), the kernel's answer in its message.
func Dial() (Decoded, error) {
	conn, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, nil)
	if err != nil {
		return Decoded{}, fmt.Errorf("opening a sock_diag netlink socket: %w", err)
	}
	c := &Conn{conn: conn}
	if _, err := c.execute(); err != nil {
		conn.Close()
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return Decoded{}, fmt.Errorf("%w (%v)", ErrNotSupported, err)
		}
		return Decoded{}, fmt.Errorf("AF_XDP sock_diag dump: %w", err)
	}
	return Decoded{c}, nil
}

// Request is struct xdp_diag_req asking for info, ring sizes and stats of
// every socket.
func Request() []byte {
	b := make([]byte, ReqLen)
	b[0] = unix.AF_XDP
	binary.NativeEndian.PutUint32(b[8:], ShowInfo|ShowRingCfg|ShowUmem|ShowStats)
	return b
}

// Dump returns the diag message of every AF_XDP socket.
func (c *Conn) Dump() ([]netlink.Message, error) {
	msgs, err := c.execute()
	if err != nil {
		return nil, fmt.Errorf("AF_XDP sock_diag dump: %w", err)
	}
	return msgs, nil
}

func (c *Conn) execute() ([]netlink.Message, error) {
	return c.conn.Execute(netlink.Message{
		Header: netlink.Header{Type: SockDiagByFamily, Flags: netlink.Request | netlink.Dump},
		Data:   Request(),
	})
}

// Close closes the socket.
func (c *Conn) Close() error { return c.conn.Close() }

// Decode reads struct xdp_diag_msg and its attributes from each
// message.
func Decode(msgs []netlink.Message) ([]Socket, error) {
	out := make([]Socket, 0, len(msgs))
	for i, m := range msgs {
		if len(m.Data) < MsgLen {
			return out, fmt.Errorf("xdp_diag message %d: %d bytes, shorter than struct xdp_diag_msg", i, len(m.Data))
		}
		if m.Data[0] != unix.AF_XDP {
			return out, fmt.Errorf("xdp_diag message %d: family %d, want AF_XDP", i, m.Data[0])
		}
		s := Socket{Inode: binary.NativeEndian.Uint32(m.Data[4:])}
		err := nlattr.Decode(m.Data[MsgLen:], func(ad *netlink.AttributeDecoder) error {
			for ad.Next() {
				switch ad.Type() {
				case DiagInfo:
					ad.Do(func(b []byte) error {
						if len(b) < InfoLen {
							return fmt.Errorf("XDP_DIAG_INFO of %d bytes", len(b))
						}
						s.Ifindex = binary.NativeEndian.Uint32(b)
						s.Queue = binary.NativeEndian.Uint32(b[4:])
						s.HasInfo = true
						return nil
					})
				case DiagRxRing, DiagTxRing, DiagFillRing, DiagCompletionRing:
					ring := RingNames[ad.Type()]
					ad.Do(func(b []byte) error {
						if len(b) < 4 {
							return fmt.Errorf("%s ring attribute of %d bytes", ring, len(b))
						}
						if s.Rings == nil {
							s.Rings = map[string]uint32{}
						}
						s.Rings[ring] = binary.NativeEndian.Uint32(b)
						return nil
					})
				case DiagStats:
					ad.Do(func(b []byte) error {
						if len(b) < StatsLen {
							return fmt.Errorf("XDP_DIAG_STATS of %d bytes", len(b))
						}
						for j := range s.Stats {
							s.Stats[j] = binary.NativeEndian.Uint64(b[8*j:])
						}
						s.HasStats = true
						return nil
					})
				}
			}
			return nil
		})
		if err != nil {
			return out, fmt.Errorf("xdp_diag message %d: %w", i, err)
		}
		out = append(out, s)
	}
	return out, nil
}

// Reader lists the AF_XDP sockets, decoded: what the collector asks of
// the kernel. Decoded is the kernel's (or a recording's); tests of what
// uses it give typed values.
type Reader interface {
	Sockets() ([]Socket, error)
	Close() error
}

// Decoded reads a Source's replies.
type Decoded struct{ Source }

// Sockets dumps and decodes every AF_XDP socket of the namespace.
func (d Decoded) Sockets() ([]Socket, error) {
	msgs, err := d.Dump()
	if err != nil {
		return nil, err
	}
	return Decode(msgs)
}
