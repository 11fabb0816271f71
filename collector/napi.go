package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf"
)

// napiMaxWork is NAPI_MAX_WORK in bpf/napi.c: the histogram has one bucket
// per work value up to it.
const napiMaxWork = 64

var (
	napiPollWork = newFamily("napi", "poll_work",
		"Packets processed per NAPI poll (the work argument of the napi:napi_poll tracepoint), with a bucket at every value 0..64, per device and execution context: idle, ksoftirqd, threaded, other (see docs/collectors/napi.md). _sum is packets, _count is polls.",
		Histogram, "device", "netns", "context")
	napiBudgetExhausted = newFamily("napi", "polls_budget_exhausted_total",
		"NAPI polls that used their whole budget (napi:napi_poll work == budget): the device had more packets than one poll may take.",
		Counter, "device", "netns", "context")
	napiOverBudget = newFamily("napi", "polls_over_budget_total",
		"NAPI polls whose work exceeded their budget (napi:napi_poll work > budget), a driver bug the kernel logs once.",
		Counter, "device", "netns", "context")
	napiUntracked = newFamily("napi", "polls_untracked_total",
		"NAPI polls not counted in xdp_napi_poll_work because its table of 1024 device and context pairs was full.",
		Counter)
	napiTracepointAttached = newFamily("napi", "tracepoint_attached",
		"1 if the napi collector's program on this tracepoint is attached, 0 if the kernel refused it (its counters are then absent).",
		Gauge, "tracepoint")
	napiRecursionMisses = newFamily("napi", "program_recursion_misses_total",
		"Times the kernel skipped the napi collector's program on this tracepoint because a BPF program was already running on that CPU (bpf_prog_info.recursion_misses): events its counters missed.",
		Counter, "tracepoint")
	softirqEntries = newCollectorFamily("napi", "softirq", "entries_total",
		"Softirq handler runs (irq:softirq_entry) per CPU and vector, as /proc/softirqs counts them.",
		Counter, "cpu", "vector")
	softirqRaises = newCollectorFamily("napi", "softirq", "raises_total",
		"Softirq raises (irq:softirq_raise) per CPU and vector; raises of an already pending vector collapse into one run.",
		Counter, "cpu", "vector")
	softirqSeconds = newCollectorFamily("napi", "softirq", "seconds_total",
		"Time from irq:softirq_entry to irq:softirq_exit per CPU and vector, including any hard interrupts taken meanwhile.",
		Counter, "cpu", "vector")
)

// napiContexts names enum napi_ctx of bpf/napi.c by value.
var napiContexts = [...]string{"other", "idle", "ksoftirqd", "threaded"}

// softirqVectors names the vectors as /proc/softirqs does, by number
// (include/linux/interrupt.h; the order is kernel ABI for the tracepoints).
var softirqVectors = [...]string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

// napiProgram ties a program in bpf/napi.c to the tracepoint it attaches to.
type napiProgram struct {
	prog, tracepoint string
	softirq          bool
}

var napiPrograms = []napiProgram{
	{prog: bpf.NapiProgNapiPoll, tracepoint: "napi:napi_poll"},
	{prog: bpf.NapiProgSoftirqEntry, tracepoint: "irq:softirq_entry", softirq: true},
	{prog: bpf.NapiProgSoftirqExit, tracepoint: "irq:softirq_exit", softirq: true},
	{prog: bpf.NapiProgSoftirqRaise, tracepoint: "irq:softirq_raise", softirq: true},
}

func init() {
	register(Registration{
		Name:           "napi",
		Help:           "NAPI poll bulk histogram (napi:napi_poll) and softirq counts and time per CPU (irq:softirq_*), as napi_monitor showed",
		DefaultEnabled: true,
		Requires:       "CAP_BPF and CAP_PERFMON (or root), kernel BTF (/sys/kernel/btf/vmlinux) for tp_btf programs (Linux 5.5+)",
		Flags: func(f *FlagSet) Builder {
			softirq := f.Flag("softirq", "Attach irq:softirq_entry/exit/raise for per-CPU, per-vector softirq counts and time.").Default("true").Bool()
			vectors := f.Flag("softirq-vectors", "Comma-separated softirq vectors to export (names as in /proc/softirqs), or 'all'.").Default("all").String()
			return func(logger *slog.Logger) (Collector, error) {
				cfg := NapiConfig{Softirq: *softirq}
				if *vectors != "all" {
					cfg.SoftirqVectors = strings.Split(*vectors, ",")
				}
				return NewNapiCollector(cfg, logger)
			}
		},
	})
}

// NapiConfig configures the napi collector.
type NapiConfig struct {
	// Softirq attaches the three softirq tracepoints.
	Softirq bool
	// SoftirqVectors limits the exported vectors (names as in
	// /proc/softirqs); all when empty. All vectors are counted in the
	// kernel either way: the limit bounds series, not cost.
	SoftirqVectors []string
}

type attachedProgram struct {
	tracepoint string
	prog       *ebpf.Program
	link       link.Link
}

// NapiCollector owns the napi programs, their links and maps.
type NapiCollector struct {
	maps     bpf.NapiMaps
	progs    []attachedProgram
	attached map[string]bool // tracepoint -> attached
	missing  []string        // tracepoints that failed, for the Update error
	vectors  [len(softirqVectors)]bool
	netns    uint64 // the exporter's own network namespace inode
}

// NewNapiCollector loads and attaches the napi programs.
func NewNapiCollector(cfg NapiConfig, logger *slog.Logger) (*NapiCollector, error) {
	spec, err := bpf.LoadNapi()
	if err != nil {
		return nil, err
	}
	return newNapiCollector(cfg, logger, spec)
}

// newNapiCollector loads every program of spec on its own, sharing the
// maps, and attaches each to its tracepoint. A program the kernel refuses
// (a tracepoint it lacks or whose prototype changed) is logged once and
// disables only the counters it feeds; only when none attaches does the
// constructor fail.
func newNapiCollector(cfg NapiConfig, logger *slog.Logger, spec *ebpf.CollectionSpec) (_ *NapiCollector, err error) {
	if _, err := kernelBTF("napi"); err != nil {
		return nil, err
	}
	c := &NapiCollector{attached: map[string]bool{}}
	if len(cfg.SoftirqVectors) == 0 {
		for i := range c.vectors {
			c.vectors[i] = true
		}
	}
	for _, name := range cfg.SoftirqVectors {
		i := vectorIndex(strings.TrimSpace(name))
		if i < 0 {
			return nil, fmt.Errorf("unknown softirq vector %q (want one of %s)", name, strings.Join(softirqVectors[:], ","))
		}
		c.vectors[i] = true
	}
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return nil, fmt.Errorf("reading the exporter's network namespace: %w", err)
	}
	c.netns = st.Ino

	if err := spec.LoadAndAssign(&c.maps, nil); err != nil {
		return nil, fmt.Errorf("creating the napi maps: %w", err)
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, c.Close())
		}
	}()
	replacements := map[string]*ebpf.Map{
		bpf.NapiMapNapiHist:    c.maps.NapiHist,
		bpf.NapiMapNapiDropped: c.maps.NapiDropped,
		bpf.NapiMapSoftirqs:    c.maps.Softirqs,
	}
	opts := ebpf.CollectionOptions{MapReplacements: replacements, Cache: btf.NewCache()}
	var errs []error
	for _, p := range napiPrograms {
		if p.softirq && !cfg.Softirq {
			continue
		}
		if err := c.attach(spec, p, opts); err != nil {
			logger.Warn("tracepoint unavailable; its counters are disabled", "tracepoint", p.tracepoint, "err", err)
			errs = append(errs, fmt.Errorf("%s: %w", p.tracepoint, err))
			c.missing = append(c.missing, p.tracepoint)
			c.attached[p.tracepoint] = false
			continue
		}
		c.attached[p.tracepoint] = true
	}
	if len(c.progs) == 0 {
		return nil, fmt.Errorf("no napi tracepoint could be attached: %w", errors.Join(errs...))
	}
	return c, nil
}

// attach loads one program from spec, reusing the collector's maps, and
// attaches it to the tracepoint named in its section (tp_btf/NAME).
func (c *NapiCollector) attach(spec *ebpf.CollectionSpec, p napiProgram, opts ebpf.CollectionOptions) error {
	name := p.prog
	one := spec.Copy()
	for n := range one.Programs {
		if n != name {
			delete(one.Programs, n)
		}
	}
	coll, err := ebpf.NewCollectionWithOptions(one, opts)
	if err != nil {
		return fmt.Errorf("loading %s: %w", name, err)
	}
	prog := coll.DetachProgram(name)
	coll.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		prog.Close()
		return fmt.Errorf("attaching %s: %w", name, err)
	}
	c.progs = append(c.progs, attachedProgram{tracepoint: p.tracepoint, prog: prog, link: l})
	return nil
}

func vectorIndex(name string) int {
	for i, v := range softirqVectors {
		if v == name {
			return i
		}
	}
	return -1
}

// Close detaches every program and releases the maps.
func (c *NapiCollector) Close() error {
	var errs []error
	for _, p := range c.progs {
		errs = append(errs, p.link.Close(), p.prog.Close())
	}
	errs = append(errs, c.maps.Close())
	c.progs = nil
	return errors.Join(errs...)
}

// Update emits the histogram and softirq counters. While a tracepoint is
// missing it returns ErrUnavailable (success 0; the reason was logged at
// startup) after emitting everything the attached programs feed.
func (c *NapiCollector) Update(ctx context.Context, ch chan<- prometheus.Metric) error {
	for _, p := range napiPrograms {
		if ok, tried := c.attached[p.tracepoint]; tried {
			ch <- napiTracepointAttached.Must(napiBool(ok), p.tracepoint)
		}
	}
	var errs []error
	for _, p := range c.progs {
		st, err := p.prog.Stats()
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the stats of the %s program: %w", p.tracepoint, err))
			continue
		}
		ch <- napiRecursionMisses.Must(float64(st.RecursionMisses), p.tracepoint)
	}
	if c.attached["napi:napi_poll"] {
		errs = append(errs, c.updatePolls(ch))
	}
	if c.attached["irq:softirq_entry"] || c.attached["irq:softirq_raise"] {
		errs = append(errs, c.updateSoftirqs(ch))
	}
	if len(c.missing) > 0 {
		errs = append(errs, fmt.Errorf("%w: tracepoints not attached: %s", ErrUnavailable, strings.Join(c.missing, ", ")))
	}
	return errors.Join(errs...)
}

func napiBool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// napiSeries is one histogram: a device in a namespace and a context.
type napiSeries struct {
	polls                  [napiMaxWork + 1]uint64
	bigPolls, bigWork      uint64
	exhausted, overBudget  uint64
	device, netns, context string
}

func (c *NapiCollector) updatePolls(ch chan<- prometheus.Metric) error {
	var (
		key    bpf.NapiNapiKey
		perCPU []bpf.NapiNapiVal
		series []napiSeries
	)
	it := c.maps.NapiHist.Iterate()
	for it.Next(&key, &perCPU) {
		s := napiSeries{device: napiCString(key.Dev[:]), netns: "", context: "unknown"}
		if uint64(key.Netns) != c.netns {
			s.netns = strconv.FormatUint(uint64(key.Netns), 10)
		}
		if int(key.Ctx) < len(napiContexts) {
			s.context = napiContexts[key.Ctx]
		}
		for _, v := range perCPU {
			for w, n := range v.Polls {
				s.polls[w] += n
			}
			s.bigPolls += v.BigPolls
			s.bigWork += v.BigWork
			s.exhausted += v.Exhausted
			s.overBudget += v.OverBudget
		}
		series = append(series, s)
	}
	if err := it.Err(); err != nil {
		return fmt.Errorf("reading the napi histogram: %w", err)
	}
	for _, s := range series {
		ch <- s.histogram()
		ch <- napiBudgetExhausted.Must(float64(s.exhausted), s.device, s.netns, s.context)
		ch <- napiOverBudget.Must(float64(s.overBudget), s.device, s.netns, s.context)
	}
	var dropped []uint64
	if err := c.maps.NapiDropped.Lookup(uint32(0), &dropped); err != nil {
		return fmt.Errorf("reading the untracked poll count: %w", err)
	}
	ch <- napiUntracked.Must(float64(napiSum(dropped)))
	return nil
}

// histogram turns per-value poll counts into cumulative le buckets.
func (s napiSeries) histogram() prometheus.Metric {
	buckets := make(map[float64]uint64, len(s.polls))
	var count, work uint64
	for w, n := range s.polls {
		count += n
		work += uint64(w) * n
		buckets[float64(w)] = count
	}
	count += s.bigPolls
	work += s.bigWork
	return prometheus.MustNewConstHistogram(napiPollWork.Desc(), count, float64(work), buckets, validLabels([]string{s.device, s.netns, s.context})...)
}

func (c *NapiCollector) updateSoftirqs(ch chan<- prometheus.Metric) error {
	seconds := c.attached["irq:softirq_entry"] && c.attached["irq:softirq_exit"]
	perVec := make([][]bpf.NapiSoftirqVal, len(softirqVectors))
	for vec := range softirqVectors {
		if err := c.maps.Softirqs.Lookup(uint32(vec), &perVec[vec]); err != nil {
			return fmt.Errorf("reading softirq vector %s: %w", softirqVectors[vec], err)
		}
	}
	for cpu := range perVec[0] {
		// A CPU that has run no softirq at all since the collector
		// started is offline (or only possible, never present).
		active := false
		for vec := range perVec {
			active = active || perVec[vec][cpu].Entries > 0 || perVec[vec][cpu].Raises > 0
		}
		if !active {
			continue
		}
		cpuLabel := strconv.Itoa(cpu)
		for vec, name := range softirqVectors {
			if !c.vectors[vec] {
				continue
			}
			v := perVec[vec][cpu]
			if c.attached["irq:softirq_entry"] {
				ch <- softirqEntries.Must(float64(v.Entries), cpuLabel, name)
			}
			if c.attached["irq:softirq_raise"] {
				ch <- softirqRaises.Must(float64(v.Raises), cpuLabel, name)
			}
			if seconds {
				ch <- softirqSeconds.Must(float64(v.Ns)/1e9, cpuLabel, name)
			}
		}
	}
	return nil
}

func napiSum(xs []uint64) uint64 {
	var t uint64
	for _, x := range xs {
		t += x
	}
	return t
}

// napiCString converts a NUL-terminated kernel char array.
func napiCString(b []int8) string {
	out := make([]byte, 0, len(b))
	for _, c := range b {
		if c == 0 {
			break
		}
		out = append(out, byte(c))
	}
	return string(out)
}
