package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/mdlayher/netlink"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

func init() {
	register(Registration{
		Name:           "xsk",
		Help:           "AF_XDP socket statistics from sock_diag (XDP_DIAG_STATS), per socket with its device and queue",
		DefaultEnabled: true,
		Requires:       "Linux 5.9+ (XDP_DIAG_STATS) built with CONFIG_XDP_SOCKETS_DIAG (module xsk_diag). No privileges: the dump lists every AF_XDP socket of the exporter's network namespace.",
		DeviceLabel:    true,
		Flags: func(f *FlagSet) Builder {
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return NewXSKCollector(XSKConfig{Filter: shared.Filter}, logger)
			}
		},
	})
}

// The AF_XDP sock_diag interface, include/uapi/linux/xdp_diag.h. No Go
// library decodes it, so the structures are read by hand below.
const (
	sockDiagByFamily = 20 // SOCK_DIAG_BY_FAMILY, include/uapi/linux/sock_diag.h

	xdpShowInfo    = 1 << 0 // XDP_SHOW_INFO
	xdpShowRingCfg = 1 << 1 // XDP_SHOW_RING_CFG
	xdpShowUmem    = 1 << 2 // XDP_SHOW_UMEM
	xdpShowStats   = 1 << 4 // XDP_SHOW_STATS

	xdpDiagInfo           = 1 // XDP_DIAG_INFO: struct xdp_diag_info
	xdpDiagRxRing         = 3 // XDP_DIAG_RX_RING: struct xdp_diag_ring
	xdpDiagTxRing         = 4 // XDP_DIAG_TX_RING
	xdpDiagFillRing       = 6 // XDP_DIAG_UMEM_FILL_RING
	xdpDiagCompletionRing = 7 // XDP_DIAG_UMEM_COMPLETION_RING
	xdpDiagStats          = 9 // XDP_DIAG_STATS: struct xdp_diag_stats

	xdpDiagReqLen   = 20 // sizeof(struct xdp_diag_req)
	xdpDiagMsgLen   = 16 // sizeof(struct xdp_diag_msg)
	xdpDiagInfoLen  = 8  // sizeof(struct xdp_diag_info)
	xdpDiagStatsLen = 48 // sizeof(struct xdp_diag_stats)
)

// xskStatNames are the fields of struct xdp_diag_stats in order, with the
// metric name each becomes and its help.
var xskStatNames = [...]struct{ field, metric, help string }{
	{"n_rx_dropped", "rx_dropped_total", "frames dropped on receive because the RX ring or the UMEM had no room (struct xdp_diag_stats n_rx_dropped)"},
	{"n_rx_invalid", "rx_invalid_descriptors_total", "invalid descriptors the kernel found in the fill ring (n_rx_invalid)"},
	{"n_rx_full", "rx_ring_full_total", "times the RX ring was full (n_rx_full)"},
	{"n_fill_ring_empty", "rx_fill_ring_empty_descriptors_total", "times the fill ring was empty when the kernel needed a buffer (n_fill_ring_empty)"},
	{"n_tx_invalid", "tx_invalid_descriptors_total", "invalid descriptors the kernel found in the TX ring (n_tx_invalid)"},
	{"n_tx_ring_empty", "tx_ring_empty_descriptors_total", "times the TX ring was empty when the kernel polled it (n_tx_ring_empty)"},
}

var xskStats [len(xskStatNames)]*Family

// xskRings are the rings sock_diag reports the size of, by attribute.
var xskRings = map[uint16]string{
	xdpDiagRxRing: "rx", xdpDiagTxRing: "tx", xdpDiagFillRing: "fill", xdpDiagCompletionRing: "completion",
}

var xskRingEntries = newFamily("xsk", "ring_entries",
	"Size in descriptors of an AF_XDP socket's ring (rx, tx, and its UMEM's fill and completion rings), "+
		"from sock_diag XDP_DIAG_RX_RING, XDP_DIAG_TX_RING, XDP_DIAG_UMEM_FILL_RING and XDP_DIAG_UMEM_COMPLETION_RING; "+
		"a ring the socket has not set up has no series.",
	Gauge, "device", "queue", "inode", "ring")

func init() {
	for i, s := range xskStatNames {
		xskStats[i] = newFamily("xsk", s.metric, "AF_XDP socket "+s.help+", from sock_diag XDP_DIAG_STATS.",
			Counter, "device", "queue", "inode")
	}
}

// xskSocket is one AF_XDP socket as sock_diag reports it.
type xskSocket struct {
	inode    uint32
	ifindex  uint32
	queue    uint32
	hasInfo  bool
	stats    [len(xskStatNames)]uint64
	hasStats bool
	rings    map[string]uint32 // ring -> entries
}

// xskSource dumps every AF_XDP socket's diag message; tests replay
// constructed ones.
type xskSource interface {
	dump() ([]netlink.Message, error)
	Close() error
}

type sockDiagSource struct{ conn *netlink.Conn }

// xdpDiagRequest is struct xdp_diag_req asking for info, ring sizes and
// stats of every socket.
func xdpDiagRequest() []byte {
	b := make([]byte, xdpDiagReqLen)
	b[0] = unix.AF_XDP
	binary.NativeEndian.PutUint32(b[8:], xdpShowInfo|xdpShowRingCfg|xdpShowUmem|xdpShowStats)
	return b
}

func (s sockDiagSource) dump() ([]netlink.Message, error) {
	return s.conn.Execute(netlink.Message{
		Header: netlink.Header{Type: sockDiagByFamily, Flags: netlink.Request | netlink.Dump},
		Data:   xdpDiagRequest(),
	})
}

func (s sockDiagSource) Close() error { return s.conn.Close() }

// XSKConfig configures the xsk collector.
type XSKConfig struct {
	// Filter's devices are those whose sockets are reported; a socket
	// not yet bound (no device) is reported unless device-include is set.
	Filter
}

// xskCollector reports AF_XDP socket counters.
type xskCollector struct {
	cfg    XSKConfig
	logger *slog.Logger
	src    xskSource
}

// NewXSKCollector opens a sock_diag socket and runs one dump to find out
// whether the kernel answers for AF_XDP; without CONFIG_XDP_SOCKETS_DIAG it
// answers ENOENT and the collector is unavailable.
func NewXSKCollector(cfg XSKConfig, logger *slog.Logger) (Collector, error) {
	return asCollector(newXSKCollector(cfg, logger))
}

func newXSKCollector(cfg XSKConfig, logger *slog.Logger) (*xskCollector, error) {
	conn, err := netlink.Dial(unix.NETLINK_SOCK_DIAG, nil)
	if err != nil {
		return nil, fmt.Errorf("opening a sock_diag netlink socket: %w", err)
	}
	src := sockDiagSource{conn: conn}
	if _, err := src.dump(); err != nil {
		conn.Close()
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) {
			return nil, Unsupported("AF_XDP socket diag (needs CONFIG_XDP_SOCKETS_DIAG / module xsk_diag): %w", err)
		}
		return nil, fmt.Errorf("AF_XDP sock_diag dump: %w", err)
	}
	return &xskCollector{cfg: cfg, logger: logger, src: src}, nil
}

// Close releases the netlink socket.
func (c *xskCollector) Close() error { return c.src.Close() }

// Update dumps every AF_XDP socket of the namespace.
func (c *xskCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	msgs, err := c.src.dump()
	if err != nil {
		return fmt.Errorf("AF_XDP sock_diag dump: %w", err)
	}
	socks, err := decodeXDPDiag(msgs)
	if err != nil {
		return err
	}
	links, err := scrapeLinks(ctx)
	if links == nil {
		return err
	}
	for _, s := range socks {
		if !s.hasStats {
			continue
		}
		// A socket not yet bound has no XDP_DIAG_INFO: device and queue stay empty.
		var dev, queue string
		if s.hasInfo {
			dev = links.Label(s.ifindex)
			queue = strconv.FormatUint(uint64(s.queue), 10)
		}
		if !c.cfg.Devices.selects(dev) {
			continue
		}
		inode := strconv.FormatUint(uint64(s.inode), 10)
		for i, v := range s.stats {
			c.cfg.Families.send(ch, xskStats[i], float64(v), dev, queue, inode)
		}
		for ring, n := range s.rings {
			c.cfg.Families.send(ch, xskRingEntries, float64(n), dev, queue, inode, ring)
		}
	}
	return err
}

// decodeXDPDiag reads struct xdp_diag_msg and its attributes from each
// message.
func decodeXDPDiag(msgs []netlink.Message) ([]xskSocket, error) {
	out := make([]xskSocket, 0, len(msgs))
	for i, m := range msgs {
		if len(m.Data) < xdpDiagMsgLen {
			return out, fmt.Errorf("xdp_diag message %d: %d bytes, shorter than struct xdp_diag_msg", i, len(m.Data))
		}
		if m.Data[0] != unix.AF_XDP {
			return out, fmt.Errorf("xdp_diag message %d: family %d, want AF_XDP", i, m.Data[0])
		}
		s := xskSocket{inode: binary.NativeEndian.Uint32(m.Data[4:])}
		err := nlattr.Decode(m.Data[xdpDiagMsgLen:], func(ad *netlink.AttributeDecoder) error {
			for ad.Next() {
				switch ad.Type() {
				case xdpDiagInfo:
					ad.Do(func(b []byte) error {
						if len(b) < xdpDiagInfoLen {
							return fmt.Errorf("XDP_DIAG_INFO of %d bytes", len(b))
						}
						s.ifindex = binary.NativeEndian.Uint32(b)
						s.queue = binary.NativeEndian.Uint32(b[4:])
						s.hasInfo = true
						return nil
					})
				case xdpDiagRxRing, xdpDiagTxRing, xdpDiagFillRing, xdpDiagCompletionRing:
					ring := xskRings[ad.Type()]
					ad.Do(func(b []byte) error {
						if len(b) < 4 {
							return fmt.Errorf("%s ring attribute of %d bytes", ring, len(b))
						}
						if s.rings == nil {
							s.rings = map[string]uint32{}
						}
						s.rings[ring] = binary.NativeEndian.Uint32(b)
						return nil
					})
				case xdpDiagStats:
					ad.Do(func(b []byte) error {
						if len(b) < xdpDiagStatsLen {
							return fmt.Errorf("XDP_DIAG_STATS of %d bytes", len(b))
						}
						for j := range s.stats {
							s.stats[j] = binary.NativeEndian.Uint64(b[8*j:])
						}
						s.hasStats = true
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
