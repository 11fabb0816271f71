package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf"
)

func init() {
	register(Registration{
		Name:           "xdp",
		Help:           "XDP tracepoint counters, as xdp_monitor shows them: exceptions, redirect errors, devmap/cpumap/veth bulk transmit",
		DefaultEnabled: true,
		Requires: "Linux 5.8+ with BTF (CONFIG_DEBUG_INFO_BTF) for tp_btf programs; CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). " +
			"Nothing runs per packet unless --collector.xdp.redirect-success is set.",
		Flags: func(f *FlagSet) Builder {
			success := f.Flag("redirect-success",
				"Also count successful redirects (xdp:xdp_redirect). Costs a tracepoint program run per redirected packet.").
				Default("false").Bool()
			return func(logger *slog.Logger) (Collector, error) {
				return NewXDPCollector(XDPConfig{RedirectSuccess: *success}, logger)
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
	// RedirectSuccess attaches xdp:xdp_redirect, a program run per
	// redirected packet.
	RedirectSuccess bool
}

// xdpTracepoint is one program of bpf/xdpmon.c and the tracepoint
// prototype it was written for: the kernel's TP_PROTO arguments (without
// the leading void *__data), as rendered by protoParam. "*" matches any
// type. Only the arguments the program reads are listed: tp_btf arguments
// are positional, so a kernel whose prototype differs there would feed the
// program other values, and the program is not loaded.
type xdpTracepoint struct {
	prog   string
	params []string
	optIn  bool // only with RedirectSuccess
}

var xdpTracepoints = []xdpTracepoint{
	{prog: bpf.XdpmonProgXdpException, params: []string{"struct net_device *", "struct bpf_prog *", "u32"}},
	{prog: bpf.XdpmonProgXdpRedirectErr, params: []string{"struct net_device *", "struct bpf_prog *", "*", "int"}},
	{prog: bpf.XdpmonProgXdpRedirectMapErr, params: []string{"struct net_device *", "struct bpf_prog *", "*", "int"}},
	{prog: bpf.XdpmonProgXdpRedirect, params: []string{"struct net_device *", "struct bpf_prog *"}, optIn: true},
	{prog: bpf.XdpmonProgXdpRedirectMap, params: []string{"struct net_device *", "struct bpf_prog *"}, optIn: true},
	{prog: bpf.XdpmonProgXdpDevmapXmit, params: []string{"struct net_device *", "struct net_device *", "int", "int", "int"}},
	{prog: bpf.XdpmonProgXdpBulkTx, params: []string{"struct net_device *", "int", "int", "int"}},
	{prog: bpf.XdpmonProgXdpCpumapEnqueue, params: []string{"int", "unsigned int", "unsigned int", "int"}},
	{prog: bpf.XdpmonProgXdpCpumapKthread, params: []string{"int", "unsigned int", "unsigned int", "int", "struct xdp_cpumap_stats *"}},
}

// Overflow counter indexes, in the order of the enum in bpf/xdpmon.c.
var xdpOverflowMaps = []string{
	bpf.XdpmonMapExceptions, bpf.XdpmonMapRedirects, bpf.XdpmonMapDevmapXmit,
	bpf.XdpmonMapBulkTx, bpf.XdpmonMapCpumapEnqueue, bpf.XdpmonMapCpumapKthread,
}

type xdpCollector struct {
	logger   *slog.Logger
	netns    uint32 // inode of the exporter's network namespace
	maps     map[string]*ebpf.Map
	progs    []*ebpf.Program
	links    []link.Link
	attached map[string]bool // tracepoint -> attached
}

// NewXDPCollector loads and attaches the tracepoint programs. Each program
// loads and attaches on its own: one whose tracepoint the kernel lacks, or
// whose prototype differs from the one it was written for, is logged once
// here and only its counters are missing. It fails when BPF is not
// permitted, when the kernel has no BTF, or when no program attached.
func NewXDPCollector(cfg XDPConfig, logger *slog.Logger) (Collector, error) {
	spec, err := bpf.LoadXdpmon()
	if err != nil {
		return nil, err
	}
	return newXDPCollector(cfg, logger, spec)
}

func newXDPCollector(cfg XDPConfig, logger *slog.Logger, spec *ebpf.CollectionSpec) (_ Collector, err error) {
	kernel, err := kernelBTF("xdp")
	if err != nil {
		return nil, err
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("reading the exporter's network namespace: %w", err)
	}
	c := &xdpCollector{logger: logger, netns: uint32(st.Ino), maps: map[string]*ebpf.Map{}, attached: map[string]bool{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	for name, ms := range spec.Maps {
		m, err := ebpf.NewMap(ms)
		if err != nil {
			return nil, bpfPermission(fmt.Errorf("creating map %s: %w", name, err))
		}
		c.maps[name] = m
	}
	cache := btf.NewCache()
	for _, tp := range xdpTracepoints {
		if tp.optIn && !cfg.RedirectSuccess {
			continue
		}
		ps, ok := spec.Programs[tp.prog]
		if !ok {
			return nil, fmt.Errorf("program %s missing from the xdpmon object", tp.prog)
		}
		name := "xdp:" + ps.AttachTo
		if why, missing := checkProto(kernel, ps.AttachTo, tp.params); why != "" {
			// A tracepoint removed upstream (xdp_redirect_map_err on 6.18)
			// is normal on a current kernel; a changed prototype is not.
			level := slog.LevelWarn
			if missing {
				level = slog.LevelInfo
			}
			logger.Log(context.Background(), level, "tracepoint unavailable; its counters are disabled", "tracepoint", name, "reason", why)
			c.attached[name] = false
			continue
		}
		if err := c.attach(spec, ps, cache); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				return nil, bpfPermission(err)
			}
			logger.Warn("tracepoint program failed to load or attach; its counters are disabled", "tracepoint", name, "err", err)
			c.attached[name] = false
			continue
		}
		c.attached[name] = true
	}
	if len(c.links) == 0 {
		return nil, errors.New("no xdp tracepoint could be attached")
	}
	return c, nil
}

// attach loads one program against the shared maps and attaches it.
func (c *xdpCollector) attach(spec *ebpf.CollectionSpec, ps *ebpf.ProgramSpec, cache *btf.Cache) error {
	one := &ebpf.CollectionSpec{
		Maps:     spec.Maps,
		Programs: map[string]*ebpf.ProgramSpec{ps.Name: ps},
		Types:    spec.Types,
	}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: c.maps, Cache: cache})
	if err != nil {
		return fmt.Errorf("loading %s: %w", ps.Name, err)
	}
	prog := coll.DetachProgram(ps.Name)
	coll.Close()
	c.progs = append(c.progs, prog)
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		return fmt.Errorf("attaching %s: %w", ps.Name, err)
	}
	c.links = append(c.links, l)
	return nil
}

// bpfPermission names the capabilities when err is a permission error.
func bpfPermission(err error) error {
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
		return fmt.Errorf("BPF not permitted: the xdp collector needs CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN): %w", err)
	}
	return err
}

// checkProto compares the kernel's prototype of tracepoint tp (the
// btf_trace_<tp> typedef) with want. It returns "" when they agree, or why
// not, and whether the kernel lacks the tracepoint altogether.
func checkProto(kernel *btf.Spec, tp string, want []string) (string, bool) {
	typ, err := kernel.AnyTypeByName("btf_trace_" + tp)
	if errors.Is(err, btf.ErrNotFound) {
		return "the running kernel has no such tracepoint", true
	}
	if err != nil {
		return err.Error(), false
	}
	td, ok := typ.(*btf.Typedef)
	var fp *btf.FuncProto
	if ok {
		if p, ok := td.Type.(*btf.Pointer); ok {
			fp, _ = p.Target.(*btf.FuncProto)
		}
	}
	if fp == nil || len(fp.Params) == 0 {
		return fmt.Sprintf("unexpected BTF type %v for btf_trace_%s", typ, tp), false
	}
	params := fp.Params[1:] // the tracepoint's private data pointer
	got := make([]string, len(params))
	for i, p := range params {
		got[i] = protoParam(p.Type)
	}
	if len(got) < len(want) {
		return fmt.Sprintf("prototype (%s) has fewer arguments than (%s)", strings.Join(got, ", "), strings.Join(want, ", ")), false
	}
	for i, w := range want {
		if w != "*" && w != got[i] {
			return fmt.Sprintf("prototype (%s) differs from the supported (%s)", strings.Join(got, ", "), strings.Join(want, ", ")), false
		}
	}
	return "", false
}

// protoParam renders a parameter type as C does, without qualifiers.
func protoParam(t btf.Type) string {
	switch t := t.(type) {
	case *btf.Pointer:
		return protoParam(t.Target) + " *"
	case *btf.Const:
		return protoParam(t.Type)
	case *btf.Volatile:
		return protoParam(t.Type)
	case *btf.Struct:
		return "struct " + t.Name
	case *btf.Union:
		return "union " + t.Name
	case *btf.Enum:
		return "enum " + t.Name
	case *btf.Typedef:
		return t.Name
	case *btf.Int:
		return t.Name
	case *btf.Void:
		return "void"
	default:
		return fmt.Sprintf("%v", t)
	}
}

func (c *xdpCollector) Close() error {
	var errs []error
	for _, l := range c.links {
		errs = append(errs, l.Close())
	}
	for _, p := range c.progs {
		errs = append(errs, p.Close())
	}
	for _, m := range c.maps {
		errs = append(errs, m.Close())
	}
	c.links, c.progs, c.maps = nil, nil, nil
	return errors.Join(errs...)
}

var xdpActionNames = []string{"ABORTED", "DROP", "PASS", "TX", "REDIRECT", "UNKNOWN"}

func (c *xdpCollector) Update(_ context.Context, ch chan<- prometheus.Metric) error {
	for tp, ok := range c.attached {
		v := 0.0
		if ok {
			v = 1
		}
		ch <- xdpTracepointAttached.Must(v, tp)
	}
	names, err := interfaceNames()
	if err != nil {
		return err
	}
	dev := func(k bpf.XdpmonDevKey) string { return c.deviceLabel(names, k) }
	var errs []error

	var ek bpf.XdpmonExceptionKey
	var counts []uint64
	it := c.maps[bpf.XdpmonMapExceptions].Iterate()
	for it.Next(&ek, &counts) {
		action := xdpActionNames[min(int(ek.Action), len(xdpActionNames)-1)]
		ch <- xdpExceptions.Must(xdpSum(counts), dev(ek.Dev), fmt.Sprint(ek.ProgId), action)
	}
	errs = append(errs, it.Err())

	var rk bpf.XdpmonRedirectKey
	it = c.maps[bpf.XdpmonMapRedirects].Iterate()
	for it.Next(&rk, &counts) {
		if rk.Err == 0 {
			ch <- xdpRedirects.Must(xdpSum(counts), dev(rk.Dev), fmt.Sprint(rk.ProgId))
			continue
		}
		ch <- xdpRedirectErrors.Must(xdpSum(counts), dev(rk.Dev), fmt.Sprint(rk.ProgId), errnoName(rk.Err))
	}
	errs = append(errs, it.Err())

	var xk bpf.XdpmonXmitKey
	var xv []bpf.XdpmonXmitValue
	it = c.maps[bpf.XdpmonMapDevmapXmit].Iterate()
	for it.Next(&xk, &xv) {
		t := sumXmit(xv)
		from, to := dev(xk.From), dev(xk.To)
		ch <- xdpDevmapPackets.Must(float64(t.Sent), from, to)
		ch <- xdpDevmapDrops.Must(float64(t.Drops), from, to)
		ch <- xdpDevmapErrors.Must(float64(t.Errors), from, to)
		ch <- xdpDevmapBulks.Must(float64(t.Bulks), from, to)
	}
	errs = append(errs, it.Err())

	var bk bpf.XdpmonDevKey
	it = c.maps[bpf.XdpmonMapBulkTx].Iterate()
	for it.Next(&bk, &xv) {
		t := sumXmit(xv)
		d := dev(bk)
		ch <- xdpBulkTxPackets.Must(float64(t.Sent), d)
		ch <- xdpBulkTxDrops.Must(float64(t.Drops), d)
		ch <- xdpBulkTxErrors.Must(float64(t.Errors), d)
		ch <- xdpBulkTxBulks.Must(float64(t.Bulks), d)
	}
	errs = append(errs, it.Err())

	var qk bpf.XdpmonEnqueueKey
	var qv []bpf.XdpmonEnqueueValue
	it = c.maps[bpf.XdpmonMapCpumapEnqueue].Iterate()
	for it.Next(&qk, &qv) {
		var t bpf.XdpmonEnqueueValue
		for _, v := range qv {
			t.Processed += v.Processed
			t.Drops += v.Drops
			t.Bulks += v.Bulks
		}
		id, to := fmt.Sprint(qk.MapId), fmt.Sprint(qk.ToCpu)
		ch <- xdpEnqueuePackets.Must(float64(t.Processed), id, to)
		ch <- xdpEnqueueDrops.Must(float64(t.Drops), id, to)
		ch <- xdpEnqueueBulks.Must(float64(t.Bulks), id, to)
	}
	errs = append(errs, it.Err())

	var mapID uint32
	var kv []bpf.XdpmonKthreadValue
	it = c.maps[bpf.XdpmonMapCpumapKthread].Iterate()
	for it.Next(&mapID, &kv) {
		id := fmt.Sprint(mapID)
		// The kthread of a cpumap entry runs on that entry's CPU: the
		// per-CPU slot is the CPU label, and CPUs it never ran on are
		// left out.
		for cpu, v := range kv {
			if v.Polls == 0 {
				continue
			}
			cpuLabel := fmt.Sprint(cpu)
			ch <- xdpKthreadPackets.Must(float64(v.Processed), id, cpuLabel)
			ch <- xdpKthreadDrops.Must(float64(v.Drops), id, cpuLabel)
			ch <- xdpKthreadSched.Must(float64(v.Sched), id, cpuLabel)
			ch <- xdpKthreadPolls.Must(float64(v.Polls), id, cpuLabel)
			ch <- xdpKthreadActions.Must(float64(v.XdpPass), id, cpuLabel, "PASS")
			ch <- xdpKthreadActions.Must(float64(v.XdpDrop), id, cpuLabel, "DROP")
			ch <- xdpKthreadActions.Must(float64(v.XdpRedirect), id, cpuLabel, "REDIRECT")
		}
	}
	errs = append(errs, it.Err())

	for i, name := range xdpOverflowMaps {
		if err := c.maps[bpf.XdpmonMapOverflow].Lookup(uint32(i), &counts); err != nil {
			errs = append(errs, fmt.Errorf("reading overflow counter %s: %w", name, err))
			continue
		}
		ch <- xdpMapFull.Must(xdpSum(counts), name)
	}
	return errors.Join(errs...)
}

// deviceLabel names a device: its name when it lives in the exporter's
// network namespace, "ifindex:N" when it has gone from there, and
// "netns:INODE/ifindex:N" when it lives in another namespace, where the
// exporter cannot see names and the same ifindex can mean another device.
func (c *xdpCollector) deviceLabel(names map[uint32]string, k bpf.XdpmonDevKey) string {
	if k.Netns != c.netns {
		return fmt.Sprintf("netns:%d/ifindex:%d", k.Netns, k.Ifindex)
	}
	if n, ok := names[k.Ifindex]; ok {
		return n
	}
	return fmt.Sprintf("ifindex:%d", k.Ifindex)
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

func xdpSum(v []uint64) float64 {
	var t uint64
	for _, n := range v {
		t += n
	}
	return float64(t)
}

func sumXmit(vs []bpf.XdpmonXmitValue) bpf.XdpmonXmitValue {
	var t bpf.XdpmonXmitValue
	for _, v := range vs {
		t.Sent += v.Sent
		t.Drops += v.Drops
		t.Errors += v.Errors
		t.Bulks += v.Bulks
	}
	return t
}
