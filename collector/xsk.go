package collector

import (
	"context"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xskdiag"
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
				return asCollector(newXSKCollector(XSKConfig{Filter: shared.Filter}, logger))
			}
		},
	})
}

// xskStatNames are the fields of struct xdp_diag_stats in order, with the
// metric name each becomes and its help.
var xskStatNames = [xskdiag.NumStats]struct{ field, metric, help string }{
	{"n_rx_dropped", "rx_dropped_total", "frames dropped on receive for want of room in the RX ring or the UMEM"},
	{"n_rx_invalid", "rx_invalid_descriptors_total", "invalid descriptors the kernel found in the fill ring"},
	{"n_rx_full", "rx_ring_full_total", "times the RX ring was full"},
	{"n_fill_ring_empty", "rx_fill_ring_empty_descriptors_total", "times the fill ring was empty when the kernel wanted a buffer"},
	{"n_tx_invalid", "tx_invalid_descriptors_total", "invalid descriptors the kernel found in the TX ring"},
	{"n_tx_ring_empty", "tx_ring_empty_descriptors_total", "times the TX ring was empty when the kernel polled it"},
}

var xskStats [xskdiag.NumStats]*Family

var xskRingEntries = newFamily("xsk", "xsk_ring_entries",
	"Size in descriptors of an AF_XDP socket's ring, from sock_diag XDP_DIAG_*_RING.",
	Gauge, "device", "queue", "inode", "ring").documented("Size in descriptors of an AF_XDP socket's ring (rx, tx, and its UMEM's fill and completion rings), " +
	"from sock_diag XDP_DIAG_RX_RING, XDP_DIAG_TX_RING, XDP_DIAG_UMEM_FILL_RING and XDP_DIAG_UMEM_COMPLETION_RING; " +
	"a ring the socket has not set up has no series.")

func init() {
	for i, s := range xskStatNames {
		xskStats[i] = newFamily("xsk", "xsk_"+s.metric, "AF_XDP socket "+s.help+", from XDP_DIAG_STATS "+s.field+".",
			Counter, "device", "queue", "inode")
	}
}

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
	src    xskdiag.Reader
}

// newXSKCollector opens a sock_diag socket (xskdiag.Dial); without
// CONFIG_XDP_SOCKETS_DIAG the collector is unsupported.
func newXSKCollector(cfg XSKConfig, logger *slog.Logger) (*xskCollector, error) {
	r, err := xskdiag.Dial()
	if err != nil {
		return nil, err
	}
	return &xskCollector{cfg: cfg, logger: logger, src: r}, nil
}

// Close releases the netlink socket.
func (c *xskCollector) Close() error { return c.src.Close() }

// Update dumps every AF_XDP socket of the namespace.
func (c *xskCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	socks, err := c.src.Sockets()
	if err != nil {
		return err
	}
	links, err := snap.Get()
	if links == nil {
		return err
	}
	for _, s := range socks {
		if !s.HasStats {
			continue
		}
		// A socket not yet bound has no XDP_DIAG_INFO: device and queue stay empty.
		var dev, queue string
		if s.HasInfo {
			dev = links.Label(s.Ifindex)
			queue = strconv.FormatUint(uint64(s.Queue), 10)
		}
		if !c.cfg.Devices.selects(dev) {
			continue
		}
		inode := strconv.FormatUint(uint64(s.Inode), 10)
		for i, v := range s.Stats {
			c.cfg.Families.send(ch, xskStats[i], float64(v), dev, queue, inode)
		}
		for ring, n := range s.Rings {
			c.cfg.Families.send(ch, xskRingEntries, float64(n), dev, queue, inode, ring)
		}
	}
	return err
}
