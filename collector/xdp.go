package collector

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdpmon"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/created"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
)

func init() {
	register(Registration{
		Name:           "monitor",
		Help:           "XDP tracepoint counters, as xdp_monitor shows them: exceptions, redirect errors, devmap/cpumap/veth bulk transmit",
		DefaultEnabled: true,
		// BPF_PROG_GET_FD_BY_ID and BPF_MAP_GET_FD_BY_ID tell whether the
		// programs and maps of the keys still exist (bpf/reap).
		ScrapeCapabilities: []int{unix.CAP_SYS_ADMIN},
		Requires: "Linux 5.8+ with BTF (CONFIG_DEBUG_INFO_BTF) for tp_btf programs; CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). " +
			"By default only failures run a program; --collector.monitor.xmit adds one per transmit bulk, --collector.monitor.redirect-success one per redirected packet.",
		DeviceLabel: true,
		Flags: func(f *FlagSet) Builder {
			xmit := f.Flag("xmit",
				"Also count bulk transmits: xdp:xdp_devmap_xmit, xdp:xdp_bulk_tx, xdp:xdp_cpumap_enqueue and xdp:xdp_cpumap_kthread (packets, drops, bulk sizes). "+
					"Costs a tracepoint program run per 8 to 16 forwarded frames (docs/performance.md has the measured cost).").
				Default("false").Bool()
			success := f.Flag("redirect-success",
				"Also count successful redirects (xdp:xdp_redirect). Costs a tracepoint program run per redirected packet.").
				Default("false").Bool()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return NewXDPCollector(XDPConfig{Xmit: *xmit, RedirectSuccess: *success, Filter: shared.Filter}, logger)
			}
		},
	})
}

var (
	xdpExceptions = newFamily("monitor", "monitor_exceptions_total",
		"XDP exceptions per device and action over every program that ran there, reloads included (xdp:xdp_exception).",
		Counter, "device", "action")
	xdpRedirectErrors = newFamily("monitor", "monitor_redirect_errors_total",
		"Failed XDP redirects per device and errno over every program that ran there, reloads included (xdp:xdp_redirect_err).",
		Counter, "device", "errno")
	xdpRedirects = newFamily("monitor", "monitor_redirects_total",
		"Successful XDP redirects per device and program, from xdp:xdp_redirect and xdp:xdp_redirect_map.",
		Counter, "device", "prog_id").documented("Successful XDP redirects (xdp:xdp_redirect, xdp:xdp_redirect_map); only with --collector.monitor.redirect-success.")

	xdpDevmapPackets = newFamily("monitor", "monitor_devmap_xmit_packets_total",
		"Frames sent by devmap/redirect bulk transmit (xdp:xdp_devmap_xmit sent).", Counter, "from_device", "to_device")
	xdpDevmapDrops = newFamily("monitor", "monitor_devmap_xmit_drops_total",
		"Frames dropped by devmap/redirect bulk transmit (xdp:xdp_devmap_xmit drops).", Counter, "from_device", "to_device")
	xdpDevmapErrors = newFamily("monitor", "monitor_devmap_xmit_errors_total",
		"Bulk transmits whose ndo_xdp_xmit returned an error (xdp:xdp_devmap_xmit err != 0).", Counter, "from_device", "to_device")
	xdpDevmapBulks = newFamily("monitor", "monitor_devmap_xmit_bulks_total",
		"Bulk transmits (xdp:xdp_devmap_xmit events); packets/bulks is xdp_monitor's bulk-average.", Counter, "from_device", "to_device")

	xdpBulkTxPackets = newFamily("monitor", "monitor_bulk_tx_packets_total",
		"Frames sent by a driver's XDP_TX bulk flush (xdp:xdp_bulk_tx sent; veth).", Counter, "device")
	xdpBulkTxDrops = newFamily("monitor", "monitor_bulk_tx_drops_total",
		"Frames dropped by a driver's XDP_TX bulk flush (xdp:xdp_bulk_tx drops).", Counter, "device")
	xdpBulkTxErrors = newFamily("monitor", "monitor_bulk_tx_errors_total",
		"XDP_TX bulk flushes that returned an error (xdp:xdp_bulk_tx err != 0).", Counter, "device")
	xdpBulkTxBulks = newFamily("monitor", "monitor_bulk_tx_bulks_total",
		"XDP_TX bulk flushes (xdp:xdp_bulk_tx events).", Counter, "device")

	xdpEnqueuePackets = newFamily("monitor", "monitor_cpumap_enqueue_packets_total",
		"Frames enqueued to a cpumap CPU (xdp:xdp_cpumap_enqueue processed).", Counter, "map_id", "to_cpu")
	xdpEnqueueDrops = newFamily("monitor", "monitor_cpumap_enqueue_drops_total",
		"Frames dropped enqueueing to a cpumap CPU, queue full (xdp:xdp_cpumap_enqueue drops).", Counter, "map_id", "to_cpu")
	xdpEnqueueBulks = newFamily("monitor", "monitor_cpumap_enqueue_bulks_total",
		"Bulk enqueues to a cpumap CPU (xdp:xdp_cpumap_enqueue events).", Counter, "map_id", "to_cpu")

	xdpKthreadPackets = newFamily("monitor", "monitor_cpumap_kthread_packets_total",
		"Frames processed by the cpumap kthread (xdp:xdp_cpumap_kthread processed).", Counter, "map_id", "cpu")
	xdpKthreadDrops = newFamily("monitor", "monitor_cpumap_kthread_drops_total",
		"Frames dropped by the cpumap kthread (xdp:xdp_cpumap_kthread drops).", Counter, "map_id", "cpu")
	xdpKthreadSched = newFamily("monitor", "monitor_cpumap_kthread_sched_total",
		"cpumap kthread polls that yielded the CPU (xdp:xdp_cpumap_kthread sched).", Counter, "map_id", "cpu")
	xdpKthreadPolls = newFamily("monitor", "monitor_cpumap_kthread_polls_total",
		"cpumap kthread polls (xdp:xdp_cpumap_kthread events).", Counter, "map_id", "cpu")
	xdpKthreadActions = newFamily("monitor", "monitor_cpumap_kthread_actions_total",
		"Verdicts of the cpumap entry's XDP program run by the kthread (xdp:xdp_cpumap_kthread xdp_stats pass/drop/redirect).",
		Counter, "map_id", "cpu", "action")

	xdpTracepointAttached = newFamily("monitor", "monitor_tracepoint_attached",
		"1 if the monitor collector's program is attached to this tracepoint, 0 if the kernel lacks or refused it.",
		Gauge, "tracepoint").documented("1 if the monitor collector's program is attached to this tracepoint, 0 if the running kernel lacks it or its prototype differs.")
	xdpMapFull = newFamily("monitor", "monitor_map_full_events_total",
		"Tracepoint events not counted because the collector's map for them was full (its max_entries bounds the series).",
		Counter, "map")
)

// XDPConfig configures the monitor collector.
type XDPConfig struct {
	// Xmit attaches the bulk transmit tracepoints (devmap, XDP_TX bulk,
	// cpumap), a program run per bulk of forwarded frames.
	Xmit bool
	// RedirectSuccess attaches xdp:xdp_redirect, a program run per
	// redirected packet.
	RedirectSuccess bool
	// ForeignIdle is how long a key with a device of another network
	// namespace may count nothing before it is deleted (bpf/reap);
	// reap.DefaultIdle when 0.
	ForeignIdle time.Duration
	// Filter's devices are those whose series are reported; a bulk
	// transmit between two devices needs both selected.
	Filter
}

type xdpCollector struct {
	*xdpmon.Monitor
	netns uint32 // inode of the exporter's network namespace

	devices deviceFilter
	fams    familyFilter

	// seen dates the exception and redirect series, which appear with a
	// program, a device or an errno at run time.
	seen created.Tracker
}

// NewXDPCollector loads and attaches the tracepoint programs, each on its
// own (see tracing.Load).
func NewXDPCollector(cfg XDPConfig, logger *slog.Logger) (Collector, error) {
	spec, err := xdpmon.Spec()
	if err != nil {
		return nil, err
	}
	return newXDPCollector(cfg, logger, spec)
}

func newXDPCollector(cfg XDPConfig, logger *slog.Logger, spec *ebpf.CollectionSpec) (Collector, error) {
	netns, err := rtnl.OwnNetns()
	if err != nil {
		return nil, err
	}
	mon, err := xdpmon.New(spec, xdpmon.Options{Xmit: cfg.Xmit, RedirectSuccess: cfg.RedirectSuccess, ForeignIdle: cfg.ForeignIdle}, logger)
	if err != nil {
		return nil, bpfDenied("monitor", needsBPF, err)
	}
	return &xdpCollector{Monitor: mon, netns: uint32(netns), devices: cfg.Devices, fams: cfg.Families}, nil
}

func (c *xdpCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	sendAttached(ch, c.fams, xdpTracepointAttached, c.Set)
	links, err := snap.Get()
	if links == nil {
		return err
	}
	dev := func(d reap.Device) string { return c.deviceLabel(links, d) }
	live := reap.NewLiveness()
	devFate := func(d reap.Device) reap.Fate { return deviceFate(links, uint64(c.netns), d) }
	errs := []error{err}

	errs = append(errs, c.updateExceptions(ch, dev, devFate, live))
	errs = append(errs, c.updateRedirects(ch, dev, devFate, live))
	if c.Xmit() {
		errs = append(errs, c.updateXmit(ch, dev, devFate), c.updateCpumap(ch, live))
	}
	overflows, err := c.Overflows()
	for _, o := range overflows {
		c.fams.send(ch, xdpMapFull, float64(o.Count), o.Map)
	}
	errs = append(errs, err, missingTracepoints(c.Set))
	c.seen.Sweep()
	return errors.Join(errs...)
}

// updateExceptions sends the exceptions per device, whose totals keep
// the counts of programs since gone: one series per device and action
// that goes on across reloads (the program is xdp_bpf_prog_info's).
func (c *xdpCollector) updateExceptions(ch chan<- prometheus.Metric, dev func(reap.Device) string, devFate func(reap.Device) reap.Fate, live *reap.Liveness) error {
	totals, err := c.ExceptionTotals(devFate, live)
	for k, n := range totals {
		if d := dev(k.Device); c.devices.selects(d) {
			c.fams.sendCreated(ch, xdpExceptions, &c.seen, float64(n), d, xdpmon.ActionName(k.Action))
		}
	}
	return err
}

// updateRedirects sends the redirects per program (with
// --collector.monitor.redirect-success) and the errors per device, whose
// totals keep the counts of programs since gone.
func (c *xdpCollector) updateRedirects(ch chan<- prometheus.Metric, dev func(reap.Device) string, devFate func(reap.Device) reap.Fate, live *reap.Liveness) error {
	redir, totals, err := c.RedirectTotals(devFate, live)
	for _, r := range redir {
		if d := dev(r.Key.Dev.Device()); r.Key.Err == 0 && c.devices.selects(d) {
			c.fams.sendCreated(ch, xdpRedirects, &c.seen, float64(r.Count), d, progIDLabel(ebpf.ProgramID(r.Key.ProgId)))
		}
	}
	for k, n := range totals {
		if d := dev(k.Device); c.devices.selects(d) {
			c.fams.sendCreated(ch, xdpRedirectErrors, &c.seen, float64(n), d, xdpmon.ErrnoName(k.Errno))
		}
	}
	return err
}

// updateXmit emits the bulk transmit counters, whose programs run only
// with --collector.monitor.xmit.
func (c *xdpCollector) updateXmit(ch chan<- prometheus.Metric, dev func(reap.Device) string, devFate func(reap.Device) reap.Fate) error {
	xmit, err := c.DevmapXmit(func(k xdpmon.XdpmonXmitKey) reap.Fate {
		return reap.Worst(devFate(k.From.Device()), devFate(k.To.Device()))
	})
	for _, x := range xmit {
		from, to := dev(x.Key.From.Device()), dev(x.Key.To.Device())
		if !c.devices.selects(from) || !c.devices.selects(to) {
			continue
		}
		c.fams.send(ch, xdpDevmapPackets, float64(x.Sent), from, to)
		c.fams.send(ch, xdpDevmapDrops, float64(x.Drops), from, to)
		c.fams.send(ch, xdpDevmapErrors, float64(x.Errors), from, to)
		c.fams.send(ch, xdpDevmapBulks, float64(x.Bulks), from, to)
	}
	bulk, bulkErr := c.BulkTx(func(k xdpmon.XdpmonBulkKey) reap.Fate { return devFate(k.Dev.Device()) })
	for _, b := range bulk {
		d := dev(b.Key.Dev.Device())
		if !c.devices.selects(d) {
			continue
		}
		c.fams.send(ch, xdpBulkTxPackets, float64(b.Sent), d)
		c.fams.send(ch, xdpBulkTxDrops, float64(b.Drops), d)
		c.fams.send(ch, xdpBulkTxErrors, float64(b.Errors), d)
		c.fams.send(ch, xdpBulkTxBulks, float64(b.Bulks), d)
	}
	return errors.Join(err, bulkErr)
}

// updateCpumap emits the cpumap counters, whose programs run only with
// --collector.monitor.xmit.
func (c *xdpCollector) updateCpumap(ch chan<- prometheus.Metric, live *reap.Liveness) error {
	enq, err := c.CpumapEnqueue(live)
	for _, e := range enq {
		id, to := strconv.FormatUint(uint64(e.Key.MapId), 10), strconv.FormatUint(uint64(e.Key.ToCpu), 10)
		c.fams.send(ch, xdpEnqueuePackets, float64(e.Processed), id, to)
		c.fams.send(ch, xdpEnqueueDrops, float64(e.Drops), id, to)
		c.fams.send(ch, xdpEnqueueBulks, float64(e.Bulks), id, to)
	}
	kthreads, kthreadErr := c.CpumapKthread(live)
	for _, k := range kthreads {
		id, cpu := strconv.FormatUint(uint64(k.MapID), 10), strconv.Itoa(k.CPU)
		c.fams.send(ch, xdpKthreadPackets, float64(k.Processed), id, cpu)
		c.fams.send(ch, xdpKthreadDrops, float64(k.Drops), id, cpu)
		c.fams.send(ch, xdpKthreadSched, float64(k.Sched), id, cpu)
		c.fams.send(ch, xdpKthreadPolls, float64(k.Polls), id, cpu)
		c.fams.send(ch, xdpKthreadActions, float64(k.XdpPass), id, cpu, "pass")
		c.fams.send(ch, xdpKthreadActions, float64(k.XdpDrop), id, cpu, "drop")
		c.fams.send(ch, xdpKthreadActions, float64(k.XdpRedirect), id, cpu, "redirect")
	}
	return errors.Join(err, kthreadErr)
}

// deviceLabel names a device by the label policy (deviceLabel in
// links.go); the programs record no names, so one of another namespace,
// where the same ifindex can mean another device, is
// netns:INODE/ifindex:N.
func (c *xdpCollector) deviceLabel(links *Links, d reap.Device) string {
	if d.Netns != c.netns {
		return foreignLabel(uint64(d.Netns), ifindexLabel(d.Ifindex))
	}
	return links.Label(d.Ifindex)
}
