package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/collector/internal/parallel"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/prebuilt"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
)

func init() {
	register(Registration{
		Name:           "nic",
		Help:           "NIC driver statistics, driver info, channels, rings and private flags through the ethtool ioctl, and the vendor-neutral NIC signals (port packets, host-resource drops, allocation failures) from them and the kernel's standard counters",
		DefaultEnabled: true,
		Requires:       "Linux; no capability for the values shown here (the ethtool get ioctls, the ethtool and netdev netlink dumps and RTM_GETSTATS are unprivileged). Each ioctl takes the RTNL lock. The standard counters: ethtool's eth-mac group (Linux 5.13), pause (5.12) and FEC (5.14) statistics, netdev qstats (6.9), rtnl_link_stats64; each missing one is said once at INFO.",
		DeviceLabel:    true,
		DeviceExclude:  "lo",
		MetricsExclude: DefaultEthtoolMetricsExclude,
		Flags: func(f *FlagSet) Builder {
			sum := f.Flag("sum-queues", "Regexp (anchored) of the curated per-queue families to sum into one series per device (without a queue label), matched as metrics-exclude is; empty: every queue its own series.").Default(DefaultEthtoolSumQueues).Regexp()
			settings := f.Flag("settings-interval", "How often a device's settings (rings, private flags, link, coalescing, pause, RSS, ntuple rules) are read again; between reads the last values are sent, and a reconfiguration that changes the channels or the stat set is read at once. Counters are read every scrape. 0: every scrape.").Default("1m").Duration()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return NewEthtoolCollector(EthtoolConfig{Filter: shared.Filter, SumQueues: *sum, SettingsInterval: *settings}, logger)
			}
		},
	})
}

// DefaultEthtoolMetricsExclude leaves out the per-queue driver stats that
// have no curated family (queue_stat_<stat>), which are 90% of the series
// on a many-queue NIC; the per-queue signals that matter (XDP verdicts,
// page cache/pool, CQE compression, packets per queue) are curated
// families. --collector.nic.metrics-exclude="" brings them back.
const DefaultEthtoolMetricsExclude = "queue_stat_.*"

// DefaultEthtoolSumQueues sums three curated families per device by
// default:
//   - page_pool allocations and recycles, eleven series per queue (1,408
//     on two 64-queue mlx5 ports): the netdev collector reads the same
//     counters per pool with --collector.netdev.metrics-exclude="", and
//     what a run reads from them (the share of slow-path allocations,
//     failed recycles) is a device ratio;
//   - CQE compression, packets and blocks: it saves PCIe bandwidth, a
//     resource of the device, and the rules, the run view and the
//     PCIe estimate read its ratio per device;
//   - failed ndo_xdp_xmit frames per TX queue of the redirect target,
//     which the dashboards sum per device;
//   - mlx5's RX page cache events, five series per queue (640 on two
//     64-queue ports), which the rules and the run view read per device
//     (the page cache is the mlx5 of kernels before page_pool took its
//     place).
//
// The XDP verdict and XDP_TX failure families stay per queue: one
// queue's TX ring full is the signal.
const DefaultEthtoolSumQueues = "rx_page_pool_.*|rx_cqe_compressed_.*|xdp_xmit_failures_total|rx_page_cache_events_total"

// ethtoolParallelism bounds the devices queried at once. Every ethtool
// ioctl serialises on RTNL, so more workers mostly contend; a few overlap
// the kernel's work with building metrics.
const ethtoolParallelism = 4

// EthtoolConfig configures the ethtool collector. A nil SumQueues sums no
// queue.
type EthtoolConfig struct {
	// Filter selects the curated families and the driver stats without
	// one (stat_<stat>, queue_stat_<stat>) alike.
	Filter
	SumQueues *regexp.Regexp
	// SettingsInterval is how long a device's settings are sent from the
	// last read (--collector.nic.settings-interval); 0 reads them every
	// scrape.
	SettingsInterval time.Duration
}

type ethtoolCollector struct {
	src      ethtoolSource
	filter   deviceFilter
	fams     familyFilter
	sum      *regexp.Regexp
	settings time.Duration
	now      func() time.Time
	logger   *slog.Logger

	mu      sync.Mutex
	devices map[int]*ethtoolDev // by ifindex
	descs   map[string]*prometheus.Desc

	unsupported standardSources

	scratch sync.Pool // *[]uint64
}

// NewEthtoolCollector queries the running kernel.
func NewEthtoolCollector(cfg EthtoolConfig, logger *slog.Logger) (Collector, error) {
	src, err := newKernelEthtool()
	if err != nil {
		return nil, err
	}
	return newEthtoolCollector(cfg, src, logger), nil
}

func newEthtoolCollector(cfg EthtoolConfig, src ethtoolSource, logger *slog.Logger) *ethtoolCollector {
	return &ethtoolCollector{
		src:      src,
		filter:   cfg.Devices,
		fams:     cfg.Families,
		sum:      anchor(cfg.SumQueues),
		settings: cfg.SettingsInterval,
		now:      time.Now,
		logger:   logger,
		devices:  map[int]*ethtoolDev{},
		descs:    map[string]*prometheus.Desc{},
	}
}

func (c *ethtoolCollector) Close() error { return c.src.Close() }

// ethtoolKey identifies what a cached entry was built from. The ifindex
// names one netdev for its lifetime and the driver cannot change under
// it. Drivers name their per-queue stats after the channels, so a
// reconfiguration (ethtool -L) renames stats, and may keep their count
// (veth: rx 2 tx 1 and rx 1 tx 5 both have 18 stats): the channel counts,
// read on every scrape anyway, are part of the key.
type ethtoolKey struct {
	name       string
	driver     string
	nStats     int
	nPrivFlags int
	channels   [4]uint32 // rx, tx, other, combined
}

// ethtoolEntry is everything about a device that only changes with its
// string sets: the plan that turns the GSTATS array into samples, whether
// the driver names a host-resource drop, and the private flag names.
type ethtoolEntry struct {
	key      ethtoolKey
	samples  []ethtoolSample
	sources  int // samples with a source series
	hasDrops bool
	// privBits are the GPFLAGS bits of the private flags reported, with
	// their label pairs.
	privBits  []int
	privPairs [][]*dto.LabelPair
}

// ethtoolDev is what the collector keeps for one ifindex: its current
// plan, and which optional calls its driver refuses (the driver's
// ethtool_ops do not change for the device's lifetime).
type ethtoolDev struct {
	plan                            atomic.Pointer[ethtoolEntry]
	settings                        atomic.Pointer[ethtoolSettings]
	noChannels, noRing, noPrivFlags atomic.Bool
	noConfig                        ethtoolConfigUnsupported
}

// ethtoolSample maps one stat index, plus those summed into it, to one
// series.
type ethtoolSample struct {
	idx    int
	summed []int
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	scale  float64
	pairs  []*dto.LabelPair // built once; read-only afterwards
	std    stdKey           // sent only where the device lacks this standard counter
	// sourceDesc and sourcePairs are the sample's
	// xdp_nic_signal_source_info series, for a NIC signal.
	sourceDesc  *prometheus.Desc
	sourcePairs []*dto.LabelPair
}

func (c *ethtoolCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	devs, err := c.src.Devices(snap)
	if err != nil {
		return fmt.Errorf("listing interfaces: %w", err)
	}
	selected := devs[:0:0]
	present := make(map[int]bool, len(devs))
	for _, d := range devs {
		if !c.filter.selects(d.Label) {
			continue
		}
		selected = append(selected, d)
		present[d.Index] = true
	}
	c.mu.Lock()
	for idx := range c.devices {
		if !present[idx] {
			delete(c.devices, idx)
		}
	}
	c.mu.Unlock()

	indexes := make([]int, len(selected))
	for i, d := range selected {
		indexes[i] = d.Index
	}
	slices.Sort(indexes)
	std, stdErr := c.readStandard(indexes)
	errs := parallel.Each(ctx, len(selected), min(ethtoolParallelism, runtime.GOMAXPROCS(0)), func(i int) error {
		if err := c.deviceSafe(selected[i], std, ch); err != nil {
			return fmt.Errorf("%s: %w", selected[i].Label, err)
		}
		return nil
	})
	return errors.Join(append(errs, stdErr)...)
}

// deviceSafe turns a panic in one device's decoding into that device's
// error: the scrape framework recovers panics only on the goroutine that
// runs Update, and a panic on a worker would end the process.
func (c *ethtoolCollector) deviceSafe(d ethtoolDevice, std *nicStandard, ch chan<- prometheus.Metric) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return c.device(d, std, ch)
}

// skippable sorts ioctl errors: a device that vanished (ENODEV, ENXIO) or a
// driver that does not implement the call (EOPNOTSUPP) is not a failure.
func skippable(err error) bool {
	return errors.Is(err, unix.ENODEV) || errors.Is(err, unix.ENXIO) || errors.Is(err, unix.EOPNOTSUPP)
}

func (c *ethtoolCollector) device(d ethtoolDevice, std *nicStandard, ch chan<- prometheus.Metric) error {
	info, err := c.src.DriverInfo(d.Name)
	if err != nil {
		if skippable(err) {
			c.logger.Debug("skipping interface", "device", d.Label, "call", "ETHTOOL_GDRVINFO", "err", err)
			return nil
		}
		return fmt.Errorf("ETHTOOL_GDRVINFO: %w", err)
	}
	c.fams.send(ch, ethtoolDriverInfoFam, 1, d.Label, info.Driver, info.Version, info.FirmwareVersion, info.BusInfo)
	st := c.state(d.Index)

	var errs []error
	key := ethtoolKey{name: d.Name, driver: info.Driver, nStats: info.NStats, nPrivFlags: info.NPrivFlags}
	key.channels = c.sendChannels(ch, d, st, &errs)

	e, err := c.entry(d, st, key)
	if errors.Is(err, ethtoolioctl.ErrStatsChanged) {
		// The string set moved between GDRVINFO and GSTRINGS; the next
		// scrape sees the new one.
		c.logger.Debug("stat set changed while reading it", "device", d.Label, "err", err)
		return errors.Join(errs...)
	}
	if err != nil {
		if skippable(err) {
			c.logger.Debug("skipping interface", "device", d.Label, "call", "ETHTOOL_GSTRINGS", "err", err)
			return errors.Join(errs...)
		}
		return errors.Join(append(errs, fmt.Errorf("ETHTOOL_GSTRINGS: %w", err))...)
	}
	if len(e.samples) > 0 {
		errs = append(errs, c.sendStats(ch, d, st, e, info.NStats, std))
	}
	c.sendStandard(ch, d, info.Driver, e, std)
	c.sendSettings(ch, d, st, e, &errs)
	return errors.Join(errs...)
}

// sendChannels sends the channel counts and returns them, the part of
// the plan's key a reconfiguration changes.
func (c *ethtoolCollector) sendChannels(ch chan<- prometheus.Metric, d ethtoolDevice, st *ethtoolDev, errs *[]error) [4]uint32 {
	if st.noChannels.Load() {
		return [4]uint32{}
	}
	chans, err := c.src.Channels(d.Name)
	if !c.optional(err, d.Label, "ETHTOOL_GCHANNELS", &st.noChannels, errs) {
		return [4]uint32{}
	}
	for _, v := range []struct {
		typ      string
		cur, max uint32
	}{
		{"rx", chans.RxCount, chans.MaxRx},
		{"tx", chans.TxCount, chans.MaxTx},
		{"other", chans.OtherCount, chans.MaxOther},
		{"combined", chans.CombinedCount, chans.MaxCombined},
	} {
		if v.max == 0 {
			continue // the driver has no channels of this type
		}
		c.fams.send(ch, ethtoolChannels, float64(v.cur), d.Label, v.typ)
		c.fams.send(ch, ethtoolChannelsMax, float64(v.max), d.Label, v.typ)
	}
	return [4]uint32{chans.RxCount, chans.TxCount, chans.OtherCount, chans.CombinedCount}
}

// sendStats reads the stats and sends them by the plan, but for the
// signals the device's standard counters give (sendStandard sends those).
func (c *ethtoolCollector) sendStats(ch chan<- prometheus.Metric, d ethtoolDevice, st *ethtoolDev, e *ethtoolEntry, nStats int, std *nicStandard) error {
	sp, _ := c.scratch.Get().(*[]uint64)
	if sp == nil {
		sp = new([]uint64)
	}
	defer c.scratch.Put(sp)
	vals, err := c.src.Stats(d.Name, nStats, *sp)
	*sp = vals
	switch {
	case errors.Is(err, ethtoolioctl.ErrStatsChanged):
		st.plan.CompareAndSwap(e, nil)
		c.logger.Debug("stat count changed; names are re-read next scrape", "device", d.Label, "err", err)
	case skippable(err):
		c.logger.Debug("skipping stats", "device", d.Label, "call", "ETHTOOL_GSTATS", "err", err)
	case err != nil:
		return fmt.Errorf("ETHTOOL_GSTATS: %w", err)
	default:
		ms := make([]prebuilt.Metric, len(e.samples), len(e.samples)+e.sources)
		for i, s := range e.samples {
			if std.replaces(d.Index, s.std) {
				continue
			}
			v := vals[s.idx]
			for _, j := range s.summed {
				v += vals[j]
			}
			ms[i] = prebuilt.New(s.desc, s.typ, float64(v)*s.scale, s.pairs)
			ch <- &ms[i]
			if s.sourcePairs != nil {
				ms = append(ms, prebuilt.New(s.sourceDesc, prometheus.GaugeValue, 1, s.sourcePairs))
				ch <- &ms[len(ms)-1]
			}
		}
	}
	return nil
}

// optional handles the error of a call a driver may not implement: it
// returns true when the result is usable. EOPNOTSUPP is remembered for the
// device's lifetime (the driver's ethtool_ops do not change) and logged
// once at debug; a vanished device is skipped.
func (c *ethtoolCollector) optional(err error, dev, call string, unsupported *atomic.Bool, errs *[]error) bool {
	switch {
	case err == nil:
		return true
	case errors.Is(err, unix.EOPNOTSUPP):
		if !unsupported.Swap(true) {
			c.logger.Debug("driver does not support call; not asking again", "device", dev, "call", call, "err", err)
		}
	case skippable(err):
		c.logger.Debug("skipping call", "device", dev, "call", call, "err", err)
	default:
		*errs = append(*errs, fmt.Errorf("%s: %w", call, err))
	}
	return false
}
