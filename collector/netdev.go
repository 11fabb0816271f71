package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/irq"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
)

func init() {
	register(Registration{
		Name:           "netdev",
		Help:           "Kernel netdev generic netlink family: per-device and per-queue qstats, page pools, XDP features, queue to NAPI/IRQ/CPU mapping",
		DefaultEnabled: true,
		Requires: "the \"netdev\" generic netlink family: Linux 6.3+ for dev-get (XDP features), 6.8+ for page-pool-get, " +
			"6.8+ for queue-get/napi-get, 6.9+ for qstats-get, CONFIG_PAGE_POOL_STATS for page-pool-stats-get; " +
			"qstats need a driver with netdev_stat_ops (virtio_net, mlx5, bnxt, ice/idpf, gve, ...). No privileges needed.",
		DeviceLabel:    true,
		MetricsExclude: DefaultNetdevMetricsExclude,
		Flags: func(f *FlagSet) Builder {
			perQueue := f.Flag("per-queue-stats", "Report qstats per queue (the widest families: stats x queues x devices).").Default("true").Bool()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return asCollector(dialNetdevCollector(NetdevConfig{Filter: shared.Filter, PerQueueStats: *perQueue, ProcFS: shared.ProcFS}, logger))
			}
		},
	})
}

// DefaultNetdevMetricsExclude leaves out, by default, what another family
// already says, what is a setting rather than a signal, and per-queue
// detail of what the device totals (xdp_netdev_qstats_*) carry:
//   - the per-queue checksum, HW-GRO, HW-GSO, rate-limit and error
//     counters: up to ten per RX queue and eight per TX queue (mlx5 on
//     Linux 6.18 reports ten and five), and the per-queue bytes, TX
//     packets and allocation failures, whose device totals the qstats_*
//     families carry and which no rule or panel reads per queue (512
//     series on two 64-queue ports); the RX packets, drops and queue
//     stops stay per queue;
//   - the page pool statistics per pool (page-pool-stats-get): eleven per
//     RX queue, and the nic collector's xdp_nic_rx_page_pool_*
//     families read the same counters (page_pool_get_stats) where the
//     driver reports them;
//   - page_pool_inflight_bytes, page_pool_inflight_pages times the
//     pool's page size;
//   - napi_info, whose NAPI id and IRQ xdp_netdev_queue_info has for
//     every queue a driver links to its NAPI, and the per-NAPI settings
//     defer-hard-irqs and gro-flush-timeout, set per device (sysfs) or
//     by busy-polling applications.
//
// --collector.netdev.metrics-exclude="" brings them all back.
const DefaultNetdevMetricsExclude = "queue_(rx_csum_.*|rx_hw_gro_.*|rx_hw_drop_ratelimits|tx_hw_drop_errors|tx_csum_none|tx_needs_csum|tx_hw_gso_.*|tx_hw_drop_ratelimits|rx_bytes|tx_bytes|tx_packets|rx_alloc_fail)_total|" +
	"page_pool_(allocations|recycles)_total|page_pool_inflight_bytes|napi_info|napi_defer_hard_irqs|napi_gro_flush_timeout_seconds"

// NetdevConfig configures the netdev collector.
type NetdevConfig struct {
	Filter
	// PerQueueStats adds the xdp_netdev_queue_* qstats families.
	PerQueueStats bool
	// ProcFS is the procfs mount point, for irq/N/smp_affinity_list;
	// /proc when empty.
	ProcFS string
}

// netdevCollector reads the kernel's "netdev" generic netlink family.
type netdevCollector struct {
	cfg    NetdevConfig
	logger *slog.Logger
	src    netdev.Reader

	mu sync.Mutex
	// unsupported holds commands the kernel refused with EOPNOTSUPP (an
	// older kernel, or page-pool-stats-get without CONFIG_PAGE_POOL_STATS):
	// they are reported once and then no longer asked for.
	unsupported map[uint8]bool
}

// dialNetdevCollector resolves the "netdev" generic netlink family. It fails when the kernel has no such family (before 6.3).
func dialNetdevCollector(cfg NetdevConfig, logger *slog.Logger) (*netdevCollector, error) {
	r, err := netdev.Dial()
	if err != nil {
		return nil, err
	}
	return newNetdevCollector(cfg, logger, r), nil
}

func newNetdevCollector(cfg NetdevConfig, logger *slog.Logger, src netdev.Reader) *netdevCollector {
	cfg.ProcFS = procRoot(cfg.ProcFS)
	return &netdevCollector{cfg: cfg,
		logger: logger, src: src, unsupported: map[uint8]bool{}}
}

// Close releases the source (sockets live only for one dump).
func (c *netdevCollector) Close() error { return c.src.Close() }

// netdevGet runs one command through fetch; ok is false when the
// command is not supported here (logged once, not an error afterwards) or
// failed before any reply.
func netdevGet[T any](c *netdevCollector, cmd uint8, fetch func(netdev.Reader) ([]T, error)) (got []T, ok bool, err error) {
	c.mu.Lock()
	skip := c.unsupported[cmd]
	c.mu.Unlock()
	if skip {
		return nil, false, nil
	}
	got, err = fetch(c.src)
	if errors.Is(err, unix.EOPNOTSUPP) {
		c.mu.Lock()
		first := !c.unsupported[cmd]
		c.unsupported[cmd] = true
		c.mu.Unlock()
		if first {
			c.logger.Info("netdev command not supported by this kernel; its metrics are left out",
				"command", netdev.CmdNames[cmd], "hint", netdev.UnsupportedHint(cmd), "err", err)
		}
		return nil, false, nil
	}
	if err != nil {
		err = fmt.Errorf("netdev %s: %w", netdev.CmdNames[cmd], err)
	}
	return got, err == nil || got != nil, err
}

// device returns the label to report for ifindex, or false when the
// device is filtered out.
func (c *netdevCollector) device(links *Links, ifindex uint32) (string, bool) {
	label := links.Label(ifindex)
	return label, c.cfg.Devices.selects(label)
}

// Update runs one dump per supported command. A failing command does not
// stop the others; its error is returned after everything else was sent.
func (c *netdevCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	links, err := snap.Get()
	if links == nil {
		return err
	}
	errs := []error{err}
	steps := []func(chan<- prometheus.Metric, *Links) error{
		c.updateDevs, c.updateQstats, c.updateQueues, c.updatePagePools,
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if err := step(ch, links); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func (c *netdevCollector) updateDevs(ch chan<- prometheus.Metric, links *Links) error {
	devs, ok, err := netdevGet(c, netdev.CmdDevGet, netdev.Reader.Devs)
	if !ok {
		return err
	}
	for _, d := range devs {
		dev, ok := c.device(links, d.Ifindex)
		if !ok {
			continue
		}
		c.emitFlags(ch, netdevXDPFeature, d.XDPFeatures, netdev.XDPActNames[:], dev)
		if d.HasRxMetadata {
			c.emitFlags(ch, netdevXDPRxMetadataFeature, d.XDPRxMetadata, netdev.XDPRxMetadataNames[:], dev)
		}
		if d.HasXSKFeatures {
			c.emitFlags(ch, netdevXSKFeature, d.XSKFeatures, netdev.XSKFlagNames[:], dev)
		}
		if d.HasZCMaxSegs {
			c.cfg.Families.send(ch, netdevXDPZCMaxSegs, float64(d.XDPZCMaxSegs), dev)
		}
	}
	return err
}

// emitFlags sends one 0/1 sample per known flag, and one per unknown set
// bit (named by its value) so that flags of newer kernels are not lost.
func (c *netdevCollector) emitFlags(ch chan<- prometheus.Metric, fam *Family, bits uint64, names []string, dev string) {
	for i, name := range names {
		c.cfg.Families.send(ch, fam, float64(bits>>i&1), dev, name)
	}
	for i := len(names); i < 64; i++ {
		if bits>>i&1 == 1 {
			c.cfg.Families.send(ch, fam, 1, dev, "0x"+strconv.FormatUint(1<<i, 16))
		}
	}
}

func (c *netdevCollector) updateQstats(ch chan<- prometheus.Metric, links *Links) error {
	stats, ok, err := netdevGet(c, netdev.CmdQstatsGet, func(r netdev.Reader) ([]netdev.Qstats, error) { return r.Qstats(false) })
	if !ok {
		return err
	}
	errs := []error{err}
	if c.cfg.PerQueueStats {
		more, _, err := netdevGet(c, netdev.CmdQstatsGet, func(r netdev.Reader) ([]netdev.Qstats, error) { return r.Qstats(true) })
		errs = append(errs, err)
		stats = append(stats, more...)
	}
	for i := range stats {
		s := &stats[i]
		dev, ok := c.device(links, s.Ifindex)
		if !ok {
			continue
		}
		if !s.PerQueue {
			for j, present := range s.Present {
				if present {
					c.cfg.Families.send(ch, netdevQstatsDevice[j], float64(s.Values[j]), dev)
				}
			}
			continue
		}
		queue, typ := strconv.FormatUint(uint64(s.QueueID), 10), netdev.QueueTypeName(s.QueueType)
		for j, present := range s.Present {
			if present {
				c.cfg.Families.send(ch, netdevQstatsQueue[j], float64(s.Values[j]), dev, queue, typ)
			}
		}
	}
	return errors.Join(errs...)
}

func (c *netdevCollector) updateQueues(ch chan<- prometheus.Metric, links *Links) error {
	var errs []error
	napis, _, err := netdevGet(c, netdev.CmdNapiGet, netdev.Reader.Napis)
	errs = append(errs, err)
	byID := make(map[uint32]*netdev.Napi, len(napis))
	for i := range napis {
		n := &napis[i]
		byID[n.ID] = n
		dev, ok := c.device(links, n.Ifindex)
		if !ok {
			continue
		}
		id := strconv.FormatUint(uint64(n.ID), 10)
		var irq, pid string
		if n.HasIRQ {
			irq = strconv.FormatUint(uint64(n.IRQ), 10)
		}
		if n.PID != 0 {
			pid = strconv.FormatUint(uint64(n.PID), 10)
		}
		c.cfg.Families.send(ch, netdevNapiInfo, 1, dev, id, irq, pid)
		if n.HasDeferHardIRQs {
			c.cfg.Families.send(ch, netdevNapiDeferHardIRQs, float64(n.DeferHardIRQs), dev, id)
		}
		if n.HasGROFlushTimeout {
			c.cfg.Families.send(ch, netdevNapiGROFlushTimeout, float64(n.GROFlushTimeoutNs)/1e9, dev, id)
		}
	}

	queues, ok, err := netdevGet(c, netdev.CmdQueueGet, netdev.Reader.Queues)
	errs = append(errs, err)
	if !ok {
		return errors.Join(errs...)
	}
	// One affinity series per IRQ of a selected device: an IRQ serves one
	// NAPI, which the device's RX and TX queues may share.
	seen := map[uint32]bool{}
	for _, q := range queues {
		dev, ok := c.device(links, q.Ifindex)
		if !ok {
			continue
		}
		var napiID, irqLabel string
		if q.NapiID != 0 {
			napiID = strconv.FormatUint(uint64(q.NapiID), 10)
		}
		if n := byID[q.NapiID]; q.NapiID != 0 && n != nil && n.HasIRQ {
			irqLabel = strconv.FormatUint(uint64(n.IRQ), 10)
			if !seen[n.IRQ] {
				seen[n.IRQ] = true
				a, err := irq.ReadAffinity(c.cfg.ProcFS, n.IRQ)
				if err != nil {
					c.logger.Debug("reading IRQ affinity", "irq", n.IRQ, "err", err)
				}
				if a.Allowed != "" || a.Effective != "" {
					c.cfg.Families.send(ch, netdevIRQAffinity, 1, dev, irqLabel, a.Allowed, a.Effective)
				}
			}
		}
		c.cfg.Families.send(ch, netdevQueueInfo, 1, dev, strconv.FormatUint(uint64(q.ID), 10), netdev.QueueTypeName(q.QueueType),
			napiID, irqLabel)
	}
	return errors.Join(errs...)
}

func (c *netdevCollector) updatePagePools(ch chan<- prometheus.Metric, links *Links) error {
	var errs []error
	pools, ok, err := netdevGet(c, netdev.CmdPagePoolGet, netdev.Reader.PagePools)
	errs = append(errs, err)
	if !ok {
		return errors.Join(errs...)
	}
	napiOf := make(map[uint64]string, len(pools))
	for _, p := range pools {
		dev, ok := c.poolDevice(links, p.Ifindex)
		if !ok {
			continue
		}
		id := strconv.FormatUint(p.ID, 10)
		var napiID string
		if p.NapiID != 0 {
			napiID = strconv.FormatUint(p.NapiID, 10)
		}
		napiOf[p.ID] = napiID
		c.cfg.Families.send(ch, netdevPagePoolInflight, float64(p.Inflight), dev, id, napiID)
		c.cfg.Families.send(ch, netdevPagePoolInflightMem, float64(p.InflightMem), dev, id, napiID)
		if p.Detached {
			c.cfg.Families.send(ch, netdevPagePoolDetached, 1, dev, id, napiID)
		}
	}

	if !c.cfg.Families.keeps(netdevPagePoolAllocs) && !c.cfg.Families.keeps(netdevPagePoolRecycles) {
		return errors.Join(errs...) // no family wants the dump
	}
	stats, ok, err := netdevGet(c, netdev.CmdPagePoolStatsGet, netdev.Reader.PagePoolStats)
	errs = append(errs, err)
	if !ok {
		return errors.Join(errs...)
	}
	for i := range stats {
		s := &stats[i]
		dev, ok := c.poolDevice(links, s.Ifindex)
		if !ok {
			continue
		}
		id := strconv.FormatUint(s.ID, 10)
		for j, present := range s.Present {
			if present {
				st := netdevPagePoolStats[j]
				c.cfg.Families.send(ch, st.fam, float64(s.Values[j]), dev, id, napiOf[s.ID], st.value)
			}
		}
	}
	return errors.Join(errs...)
}

// poolDevice names a pool's device. The kernel omits the ifindex of an
// orphaned pool (its netdev is gone, the pool waits for its pages to come
// back); such pools are reported without a device label unless a filter
// is set.
func (c *netdevCollector) poolDevice(links *Links, ifindex uint32) (string, bool) {
	if ifindex == 0 {
		return "", c.cfg.Devices.selects("")
	}
	return c.device(links, ifindex)
}
