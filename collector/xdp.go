package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"strconv"
	"syscall"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf"
)

func init() {
	register(Registration{
		Name:           "xdp",
		Help:           "XDP tracepoint counters, as xdp_monitor shows them: exceptions, redirect errors, devmap/cpumap/veth bulk transmit",
		DefaultEnabled: true,
		// BPF_PROG_GET_FD_BY_ID and BPF_MAP_GET_FD_BY_ID tell whether the
		// programs and maps of the keys still exist (reap.go).
		ScrapeCapabilities: []int{unix.CAP_SYS_ADMIN},
		Requires: "Linux 5.8+ with BTF (CONFIG_DEBUG_INFO_BTF) for tp_btf programs; CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). " +
			"By default only failures run a program; --collector.xdp.xmit adds one per transmit bulk, --collector.xdp.redirect-success one per redirected packet.",
		DeviceLabel: true,
		Flags: func(f *FlagSet) Builder {
			xmit := f.Flag("xmit",
				"Also count bulk transmits: xdp:xdp_devmap_xmit, xdp:xdp_bulk_tx, xdp:xdp_cpumap_enqueue and xdp:xdp_cpumap_kthread (packets, drops, bulk sizes). "+
					"Costs a tracepoint program run per 8 to 16 forwarded frames, about 2% of a core forwarding 6 Mpps (docs/performance.md).").
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
	xdpExceptions = newCollectorFamily("xdp", "", "exceptions_total",
		"XDP exceptions (xdp:xdp_exception): a program returned XDP_ABORTED or an invalid action, or the driver failed an XDP_TX/XDP_REDIRECT.",
		Counter, "device", "prog_id", "action")
	xdpRedirectErrors = newCollectorFamily("xdp", "", "redirect_errors_total",
		"Failed XDP redirects by errno (xdp:xdp_redirect_err, xdp:xdp_redirect_map_err on kernels that have it).",
		Counter, "device", "prog_id", "errno")
	xdpDeviceExceptions = newCollectorFamily("xdp", "device", "exceptions_total",
		"XDP exceptions of xdp_exceptions_total summed per device and action over every program that ran there, "+
			"including programs since replaced or unloaded: one series that goes on across reloads, for alerts on increase() per device.",
		Counter, "device", "action")
	xdpDeviceRedirectErrors = newCollectorFamily("xdp", "device", "redirect_errors_total",
		"Failed XDP redirects of xdp_redirect_errors_total summed per device and errno over every program that ran there, "+
			"including programs since replaced or unloaded: one series that goes on across reloads.",
		Counter, "device", "errno")
	xdpRedirects = newCollectorFamily("xdp", "", "redirects_total",
		"Successful XDP redirects (xdp:xdp_redirect, xdp:xdp_redirect_map); only with --collector.xdp.redirect-success.",
		Counter, "device", "prog_id")

	xdpDevmapPackets = newCollectorFamily("xdp", "devmap_xmit", "packets_total",
		"Frames sent by devmap/redirect bulk transmit (xdp:xdp_devmap_xmit sent).", Counter, "from_device", "to_device")
	xdpDevmapDrops = newCollectorFamily("xdp", "devmap_xmit", "drops_total",
		"Frames dropped by devmap/redirect bulk transmit (xdp:xdp_devmap_xmit drops).", Counter, "from_device", "to_device")
	xdpDevmapErrors = newCollectorFamily("xdp", "devmap_xmit", "errors_total",
		"Bulk transmits whose ndo_xdp_xmit returned an error (xdp:xdp_devmap_xmit err != 0).", Counter, "from_device", "to_device")
	xdpDevmapBulks = newCollectorFamily("xdp", "devmap_xmit", "bulks_total",
		"Bulk transmits (xdp:xdp_devmap_xmit events); packets/bulks is xdp_monitor's bulk-average.", Counter, "from_device", "to_device")

	xdpBulkTxPackets = newCollectorFamily("xdp", "bulk_tx", "packets_total",
		"Frames sent by a driver's XDP_TX bulk flush (xdp:xdp_bulk_tx sent; veth).", Counter, "device")
	xdpBulkTxDrops = newCollectorFamily("xdp", "bulk_tx", "drops_total",
		"Frames dropped by a driver's XDP_TX bulk flush (xdp:xdp_bulk_tx drops).", Counter, "device")
	xdpBulkTxErrors = newCollectorFamily("xdp", "bulk_tx", "errors_total",
		"XDP_TX bulk flushes that returned an error (xdp:xdp_bulk_tx err != 0).", Counter, "device")
	xdpBulkTxBulks = newCollectorFamily("xdp", "bulk_tx", "bulks_total",
		"XDP_TX bulk flushes (xdp:xdp_bulk_tx events).", Counter, "device")

	xdpEnqueuePackets = newCollectorFamily("xdp", "cpumap_enqueue", "packets_total",
		"Frames enqueued to a cpumap CPU (xdp:xdp_cpumap_enqueue processed).", Counter, "map_id", "to_cpu")
	xdpEnqueueDrops = newCollectorFamily("xdp", "cpumap_enqueue", "drops_total",
		"Frames dropped enqueueing to a cpumap CPU, queue full (xdp:xdp_cpumap_enqueue drops).", Counter, "map_id", "to_cpu")
	xdpEnqueueBulks = newCollectorFamily("xdp", "cpumap_enqueue", "bulks_total",
		"Bulk enqueues to a cpumap CPU (xdp:xdp_cpumap_enqueue events).", Counter, "map_id", "to_cpu")

	xdpKthreadPackets = newCollectorFamily("xdp", "cpumap_kthread", "packets_total",
		"Frames processed by the cpumap kthread (xdp:xdp_cpumap_kthread processed).", Counter, "map_id", "cpu")
	xdpKthreadDrops = newCollectorFamily("xdp", "cpumap_kthread", "drops_total",
		"Frames dropped by the cpumap kthread (xdp:xdp_cpumap_kthread drops).", Counter, "map_id", "cpu")
	xdpKthreadSched = newCollectorFamily("xdp", "cpumap_kthread", "sched_total",
		"cpumap kthread polls that yielded the CPU (xdp:xdp_cpumap_kthread sched).", Counter, "map_id", "cpu")
	xdpKthreadPolls = newCollectorFamily("xdp", "cpumap_kthread", "polls_total",
		"cpumap kthread polls (xdp:xdp_cpumap_kthread events).", Counter, "map_id", "cpu")
	xdpKthreadActions = newCollectorFamily("xdp", "cpumap_kthread", "actions_total",
		"Verdicts of the cpumap entry's XDP program run by the kthread (xdp:xdp_cpumap_kthread xdp_stats pass/drop/redirect).",
		Counter, "map_id", "cpu", "action")

	xdpTracepointAttached = newCollectorFamily("xdp", "monitor", "tracepoint_attached",
		"1 if the xdp collector's program is attached to this tracepoint, 0 if the running kernel lacks it or its prototype differs.",
		Gauge, "tracepoint")
	xdpMapFull = newCollectorFamily("xdp", "monitor", "map_full_events_total",
		"Tracepoint events not counted because the collector's map for them was full (its max_entries bounds the series).",
		Counter, "map")
)

// XDPConfig configures the xdp collector.
type XDPConfig struct {
	// Xmit attaches the bulk transmit tracepoints (devmap, XDP_TX bulk,
	// cpumap), a program run per bulk of forwarded frames.
	Xmit bool
	// RedirectSuccess attaches xdp:xdp_redirect, a program run per
	// redirected packet.
	RedirectSuccess bool
	// ForeignIdle is how long a key with a device of another network
	// namespace may count nothing before it is deleted (reap.go);
	// foreignIdle when 0.
	ForeignIdle time.Duration
	// Filter's devices are those whose series are reported; a bulk
	// transmit between two devices needs both selected.
	Filter
}

// xdpTracepoints are the programs of bpf/xdpmon.c. By default only the
// failure tracepoints are attached, which cost nothing while nothing
// fails; xdpXmit and xdpSuccess are the opt-in ones.
var xdpTracepoints = []tracepointProgram{
	{prog: bpf.XdpmonProgXdpException, params: []string{"struct net_device *", "struct bpf_prog *", "u32"}},
	{prog: bpf.XdpmonProgXdpRedirectErr, params: []string{"struct net_device *", "struct bpf_prog *", "*", "int"}},
	// Kernels without xdp_redirect_map(_err) (6.18 here) trace map
	// redirects through xdp_redirect(_err).
	{prog: bpf.XdpmonProgXdpRedirectMapErr, params: []string{"struct net_device *", "struct bpf_prog *", "*", "int"}, superseded: true},
	{prog: bpf.XdpmonProgXdpRedirect, params: []string{"struct net_device *", "struct bpf_prog *"}},
	{prog: bpf.XdpmonProgXdpRedirectMap, params: []string{"struct net_device *", "struct bpf_prog *"}, superseded: true},
	{prog: bpf.XdpmonProgXdpDevmapXmit, params: []string{"struct net_device *", "struct net_device *", "int", "int", "int"}},
	{prog: bpf.XdpmonProgXdpBulkTx, params: []string{"struct net_device *", "int", "int", "int"}},
	{prog: bpf.XdpmonProgXdpCpumapEnqueue, params: []string{"int", "unsigned int", "unsigned int", "int"}},
	{prog: bpf.XdpmonProgXdpCpumapKthread, params: []string{"int", "unsigned int", "unsigned int", "int", "struct xdp_cpumap_stats *"}},
}

var (
	xdpXmit = map[string]bool{bpf.XdpmonProgXdpDevmapXmit: true, bpf.XdpmonProgXdpBulkTx: true,
		bpf.XdpmonProgXdpCpumapEnqueue: true, bpf.XdpmonProgXdpCpumapKthread: true}
	xdpSuccess = map[string]bool{bpf.XdpmonProgXdpRedirect: true, bpf.XdpmonProgXdpRedirectMap: true}
)

// Overflow counter indexes, in the order of the enum in bpf/xdpmon.c.
var xdpOverflowMaps = []string{
	bpf.XdpmonMapExceptions, bpf.XdpmonMapRedirects, bpf.XdpmonMapDevmapXmit,
	bpf.XdpmonMapBulkTx, bpf.XdpmonMapCpumapEnqueue, bpf.XdpmonMapCpumapKthread,
}

type xdpCollector struct {
	*tracepointSet
	netns uint32 // inode of the exporter's network namespace
	xmit  bool   // the bulk transmit programs are attached

	devices deviceFilter
	fams    familyFilter

	exceptions *reaper[bpf.XdpmonExceptionKey]
	redirects  *reaper[bpf.XdpmonRedirectKey]
	tables     map[string]*reaper[slotKey] // by value map name

	// seen dates the exception and redirect series, which appear with a
	// program, a device or an errno at run time.
	seen firstSeen
	// retired holds the last counts of the exception and redirect-error
	// keys deleted with their program, per device and action or errno,
	// so that the device totals go on across reloads.
	retired deviceTotals
}

// deviceTotals are the counts of deleted keys of the exceptions and
// redirects maps, per device and action (exceptions) or errno (redirect
// errors); Update runs one at a time per collector.
type deviceTotals struct {
	exceptions map[deviceAction]uint64
	redirects  map[deviceErrno]uint64
}

type deviceAction struct {
	dev    devKey
	action uint32
}

type deviceErrno struct {
	dev devKey
	err int32
}

func (k deviceAction) device() devKey { return k.dev }
func (k deviceAction) label() string  { return xdpActionName(k.action) }
func (k deviceErrno) device() devKey  { return k.dev }
func (k deviceErrno) label() string   { return errnoName(k.err) }

// sendDeviceTotals sends totals (the retired counts plus the live keys')
// per device and action or errno, and forgets the retired counts of
// devices that are gone.
func sendDeviceTotals[K interface {
	comparable
	device() devKey
	label() string
}](c *xdpCollector, ch chan<- prometheus.Metric, fam *Family, retired, totals map[K]uint64, dev func(devKey) string, devFate func(devKey) fate) {
	for k, n := range totals {
		if devFate(k.device()) == keyGone {
			delete(retired, k)
			continue
		}
		if d := dev(k.device()); c.devices.selects(d) {
			c.fams.sendCreated(ch, fam, &c.seen, float64(n), d, k.label())
		}
	}
}

// NewXDPCollector loads and attaches the tracepoint programs, each on its
// own (see tracepointSet).
func NewXDPCollector(cfg XDPConfig, logger *slog.Logger) (Collector, error) {
	spec, err := bpf.LoadXdpmon()
	if err != nil {
		return nil, err
	}
	return newXDPCollector(cfg, logger, spec)
}

func newXDPCollector(cfg XDPConfig, logger *slog.Logger, spec *ebpf.CollectionSpec) (Collector, error) {
	netns, err := ownNetns()
	if err != nil {
		return nil, err
	}
	var progs []tracepointProgram
	for _, tp := range xdpTracepoints {
		if (xdpXmit[tp.prog] && !cfg.Xmit) || (xdpSuccess[tp.prog] && !cfg.RedirectSuccess) {
			continue
		}
		progs = append(progs, tp)
	}
	set, err := loadTracepoints("xdp", logger, spec, progs, func(string) string { return "xdp" })
	if err != nil {
		return nil, err
	}
	c := &xdpCollector{tracepointSet: set, netns: uint32(netns), xmit: cfg.Xmit, devices: cfg.Devices, fams: cfg.Families,
		exceptions: newReaper[bpf.XdpmonExceptionKey](cfg.ForeignIdle),
		redirects:  newReaper[bpf.XdpmonRedirectKey](cfg.ForeignIdle),
		tables:     map[string]*reaper[slotKey]{},
		retired:    deviceTotals{exceptions: map[deviceAction]uint64{}, redirects: map[deviceErrno]uint64{}}}
	for _, m := range []string{bpf.XdpmonMapDevmapXmit, bpf.XdpmonMapBulkTx, bpf.XdpmonMapCpumapEnqueue, bpf.XdpmonMapCpumapKthread} {
		c.tables[m] = newReaper[slotKey](cfg.ForeignIdle)
	}
	return c, nil
}

var xdpActionNames = []string{"ABORTED", "DROP", "PASS", "TX", "REDIRECT", "UNKNOWN"}

// xdpActionName names an action of xdp:xdp_exception; anything past
// XDP_REDIRECT is UNKNOWN.
func xdpActionName(a uint32) string { return xdpActionNames[min(int(a), len(xdpActionNames)-1)] }

func (c *xdpCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	c.emitAttached(ch, c.fams, xdpTracepointAttached)
	links, err := snap.Get()
	if links == nil {
		return err
	}
	dev := func(k devKey) string { return c.deviceLabel(links, k) }
	live := newLiveness()
	devFate := func(k devKey) fate { return deviceFate(links, uint64(c.netns), uint64(k.netns), k.ifindex) }
	errs := []error{err}

	errs = append(errs, c.updateExceptions(ch, dev, devFate, live)...)
	errs = append(errs, c.updateRedirects(ch, dev, devFate, live)...)

	if c.xmit {
		errs = append(errs, c.updateXmit(ch, dev, devFate, live)...)
	}

	var counts []uint64
	for i, name := range xdpOverflowMaps {
		if err := c.maps[bpf.XdpmonMapOverflow].Lookup(uint32(i), &counts); err != nil {
			errs = append(errs, fmt.Errorf("reading overflow counter %s: %w", name, err))
			continue
		}
		c.fams.send(ch, xdpMapFull, float64(perCPUSum(counts)), name)
	}
	errs = append(errs, c.missingErr())
	c.seen.sweep()
	return errors.Join(errs...)
}

// updateExceptions sends the exceptions per program and per device; the
// device totals keep the counts of programs since gone.
func (c *xdpCollector) updateExceptions(ch chan<- prometheus.Metric, dev func(devKey) string, devFate func(devKey) fate, live *liveness) []error {
	exc, sums, gone, goneSums, err := reapHash(c.exceptions, c.maps[bpf.XdpmonMapExceptions], func(k bpf.XdpmonExceptionKey) fate {
		return worst(devFate(devKey{k.Dev.Ifindex, k.Dev.Netns}), live.prog(k.ProgId))
	})
	errs := []error{err}
	excTotals := c.retired.exceptions
	for i, ek := range gone {
		excTotals[deviceAction{devKey{ek.Dev.Ifindex, ek.Dev.Netns}, ek.Action}] += goneSums[i]
	}
	liveE := maps.Clone(excTotals)
	for i, ek := range exc {
		d := dev(devKey{ek.Dev.Ifindex, ek.Dev.Netns})
		liveE[deviceAction{devKey{ek.Dev.Ifindex, ek.Dev.Netns}, ek.Action}] += sums[i]
		if !c.devices.selects(d) {
			continue
		}
		c.fams.sendCreated(ch, xdpExceptions, &c.seen, float64(sums[i]), d, progIDLabel(ebpf.ProgramID(ek.ProgId)), xdpActionName(ek.Action))
	}
	sendDeviceTotals(c, ch, xdpDeviceExceptions, excTotals, liveE, dev, devFate)
	return errs
}

// updateRedirects sends the redirects (with --collector.xdp.redirect-success)
// and redirect errors per program, and the errors per device, whose totals
// keep the counts of programs since gone.
func (c *xdpCollector) updateRedirects(ch chan<- prometheus.Metric, dev func(devKey) string, devFate func(devKey) fate, live *liveness) []error {
	redir, sums, goneR, goneRSums, err := reapHash(c.redirects, c.maps[bpf.XdpmonMapRedirects], func(k bpf.XdpmonRedirectKey) fate {
		return worst(devFate(devKey{k.Dev.Ifindex, k.Dev.Netns}), live.prog(k.ProgId))
	})
	errs := []error{err}
	errTotals := c.retired.redirects
	for i, rk := range goneR {
		if rk.Err != 0 {
			errTotals[deviceErrno{devKey{rk.Dev.Ifindex, rk.Dev.Netns}, rk.Err}] += goneRSums[i]
		}
	}
	liveR := maps.Clone(errTotals)
	for i, rk := range redir {
		d := dev(devKey{rk.Dev.Ifindex, rk.Dev.Netns})
		if rk.Err != 0 {
			liveR[deviceErrno{devKey{rk.Dev.Ifindex, rk.Dev.Netns}, rk.Err}] += sums[i]
		}
		if !c.devices.selects(d) {
			continue
		}
		if rk.Err == 0 {
			c.fams.sendCreated(ch, xdpRedirects, &c.seen, float64(sums[i]), d, progIDLabel(ebpf.ProgramID(rk.ProgId)))
			continue
		}
		c.fams.sendCreated(ch, xdpRedirectErrors, &c.seen, float64(sums[i]), d, progIDLabel(ebpf.ProgramID(rk.ProgId)), errnoName(rk.Err))
	}
	sendDeviceTotals(c, ch, xdpDeviceRedirectErrors, errTotals, liveR, dev, devFate)
	return errs
}

// updateXmit emits the bulk transmit and cpumap counters, whose programs
// run only with --collector.xdp.xmit.
func (c *xdpCollector) updateXmit(ch chan<- prometheus.Metric, dev func(devKey) string, devFate func(devKey) fate, live *liveness) []error {
	var errs []error
	xmitActivity := func(e slotCounts[bpf.XdpmonXmitValue]) uint64 {
		t := sumXmit(e.slots)
		return t.Sent + t.Drops + t.Bulks
	}
	xmit, err := readTable(c, bpf.XdpmonMapDevmapXmitOwners, bpf.XdpmonMapDevmapXmit, xmitActivity, func(k slotKey) fate {
		return worst(devFate(devWord(k.k0)), devFate(devWord(k.k1)))
	})
	errs = append(errs, err)
	for _, e := range xmit {
		t := sumXmit(e.slots)
		from, to := dev(devWord(e.key.k0)), dev(devWord(e.key.k1))
		if !c.devices.selects(from) || !c.devices.selects(to) {
			continue
		}
		c.fams.send(ch, xdpDevmapPackets, float64(t.Sent), from, to)
		c.fams.send(ch, xdpDevmapDrops, float64(t.Drops), from, to)
		c.fams.send(ch, xdpDevmapErrors, float64(t.Errors), from, to)
		c.fams.send(ch, xdpDevmapBulks, float64(t.Bulks), from, to)
	}

	bulk, err := readTable(c, bpf.XdpmonMapBulkTxOwners, bpf.XdpmonMapBulkTx, xmitActivity, func(k slotKey) fate {
		return devFate(devWord(k.k0))
	})
	errs = append(errs, err)
	for _, e := range bulk {
		t := sumXmit(e.slots)
		d := dev(devWord(e.key.k0))
		if !c.devices.selects(d) {
			continue
		}
		c.fams.send(ch, xdpBulkTxPackets, float64(t.Sent), d)
		c.fams.send(ch, xdpBulkTxDrops, float64(t.Drops), d)
		c.fams.send(ch, xdpBulkTxErrors, float64(t.Errors), d)
		c.fams.send(ch, xdpBulkTxBulks, float64(t.Bulks), d)
	}

	mapFate := func(k slotKey) fate { return live.bpfMap(uint32(k.k0)) }
	enq, err := readTable(c, bpf.XdpmonMapCpumapEnqueueOwners, bpf.XdpmonMapCpumapEnqueue, func(e slotCounts[bpf.XdpmonEnqueueValue]) uint64 {
		var n uint64
		for _, perCPU := range e.slots {
			for _, v := range perCPU {
				n += v.Processed + v.Drops + v.Bulks
			}
		}
		return n
	}, mapFate)
	errs = append(errs, err)
	for _, e := range enq {
		var t bpf.XdpmonEnqueueValue
		for _, perCPU := range e.slots {
			for _, v := range perCPU {
				t.Processed += v.Processed
				t.Drops += v.Drops
				t.Bulks += v.Bulks
			}
		}
		id, to := fmt.Sprint(e.key.k0), fmt.Sprint(e.key.k1)
		c.fams.send(ch, xdpEnqueuePackets, float64(t.Processed), id, to)
		c.fams.send(ch, xdpEnqueueDrops, float64(t.Drops), id, to)
		c.fams.send(ch, xdpEnqueueBulks, float64(t.Bulks), id, to)
	}

	kthreads, err := readTable(c, bpf.XdpmonMapCpumapKthreadOwners, bpf.XdpmonMapCpumapKthread, func(e slotCounts[bpf.XdpmonKthreadValue]) uint64 {
		var n uint64
		for _, perCPU := range e.slots {
			for _, v := range perCPU {
				n += v.Polls + v.Processed
			}
		}
		return n
	}, mapFate)
	errs = append(errs, err)
	for _, e := range kthreads {
		id := fmt.Sprint(e.key.k0)
		// The kthread of a cpumap entry runs on that entry's CPU: the
		// per-CPU copy is the CPU label, and CPUs it never ran on are
		// left out.
		var perCPU []bpf.XdpmonKthreadValue
		for _, slot := range e.slots {
			for cpu, v := range slot {
				if cpu >= len(perCPU) {
					perCPU = append(perCPU, make([]bpf.XdpmonKthreadValue, cpu+1-len(perCPU))...)
				}
				t := &perCPU[cpu]
				t.Processed += v.Processed
				t.Drops += v.Drops
				t.Sched += v.Sched
				t.XdpPass += v.XdpPass
				t.XdpDrop += v.XdpDrop
				t.XdpRedirect += v.XdpRedirect
				t.Polls += v.Polls
			}
		}
		for cpu, v := range perCPU {
			if v.Polls == 0 {
				continue
			}
			cpuLabel := strconv.Itoa(cpu)
			c.fams.send(ch, xdpKthreadPackets, float64(v.Processed), id, cpuLabel)
			c.fams.send(ch, xdpKthreadDrops, float64(v.Drops), id, cpuLabel)
			c.fams.send(ch, xdpKthreadSched, float64(v.Sched), id, cpuLabel)
			c.fams.send(ch, xdpKthreadPolls, float64(v.Polls), id, cpuLabel)
			c.fams.send(ch, xdpKthreadActions, float64(v.XdpPass), id, cpuLabel, "PASS")
			c.fams.send(ch, xdpKthreadActions, float64(v.XdpDrop), id, cpuLabel, "DROP")
			c.fams.send(ch, xdpKthreadActions, float64(v.XdpRedirect), id, cpuLabel, "REDIRECT")
		}
	}
	return errs
}

// readTable reads one slot table and frees the slots of keys whose objects
// are gone (reap.go).
func readTable[V any](c *xdpCollector, owners, values string, activity func(slotCounts[V]) uint64, fateOf func(slotKey) fate) ([]slotCounts[V], error) {
	entries, err := readSlots[V](c.maps[owners], c.maps[values])
	if err != nil {
		return nil, err
	}
	table := slotTable{owners: c.maps[owners], claims: c.maps[values+"_claims"], values: c.maps[values]}
	entries, err = reapSlots(c.tables[values], table, entries, activity, fateOf)
	if err != nil {
		return entries, fmt.Errorf("freeing the %s slots of gone devices or maps: %w", values, err)
	}
	return entries, nil
}

// reapHash reads a per-CPU hash map of counters, deletes the keys whose
// objects are gone (reap.go), and returns the others with their sums, and
// the deleted ones with their last sums.
func reapHash[K comparable](r *reaper[K], m *ebpf.Map, fateOf func(K) fate) (kept []K, keptSums []uint64, gone []K, goneSums []uint64, err error) {
	var (
		keys   []K
		sums   []uint64
		k      K
		counts []uint64
	)
	it := m.Iterate()
	for it.Next(&k, &counts) {
		keys, sums = append(keys, k), append(sums, perCPUSum(counts))
	}
	if err := it.Err(); err != nil {
		return nil, nil, nil, nil, fmt.Errorf("reading %s: %w", m, err)
	}
	stale := r.sweep(keys, sums, fateOf)
	var errs []error
	for i, k := range keys {
		if !stale[i] {
			kept, keptSums = append(kept, k), append(keptSums, sums[i])
			continue
		}
		if err := m.Delete(k); err != nil && !errors.Is(err, ebpf.ErrKeyNotExist) {
			errs = append(errs, fmt.Errorf("deleting a key of %s whose device or program is gone: %w", m, err))
			continue
		}
		gone, goneSums = append(gone, k), append(goneSums, sums[i])
	}
	return kept, keptSums, gone, goneSums, errors.Join(errs...)
}

// deviceLabel names a device by the label policy (deviceLabel in
// links.go); the programs record no names, so one of another namespace,
// where the same ifindex can mean another device, is
// netns:INODE/ifindex:N.
func (c *xdpCollector) deviceLabel(links *Links, k devKey) string {
	if k.netns != c.netns {
		return foreignLabel(uint64(k.netns), ifindexLabel(k.ifindex))
	}
	return links.Label(k.ifindex)
}

// errnoName turns a negative kernel errno into its name (ENETDOWN).
// Where Linux has two names for one number, the kernel's XDP code uses
// EOPNOTSUPP, not the ENOTSUP that x/sys lists first.
func errnoName(err int32) string {
	e := syscall.Errno(-err)
	if e == unix.EOPNOTSUPP {
		return "EOPNOTSUPP"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno%d", -err)
}

func sumXmit(slots [][]bpf.XdpmonXmitValue) bpf.XdpmonXmitValue {
	var t bpf.XdpmonXmitValue
	for _, vs := range slots {
		for _, v := range vs {
			t.Sent += v.Sent
			t.Drops += v.Drops
			t.Errors += v.Errors
			t.Bulks += v.Bulks
		}
	}
	return t
}
