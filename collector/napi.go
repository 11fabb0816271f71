package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/napi"
	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
)

var (
	napiPollWork = newFamily("napi", "napi_poll_work",
		"Packets processed per NAPI poll by device and context, from the work argument of napi:napi_poll.",
		Histogram, "device", "context").documented("Packets processed per NAPI poll (the work argument of the napi:napi_poll tracepoint), with a bucket at every value 0..64, per device and execution context: idle, ksoftirqd, threaded, other (see docs/collectors/napi.md). _sum is packets, _count is polls.")
	napiBudgetExhausted = newFamily("napi", "napi_polls_budget_exhausted_total",
		"NAPI polls that used their whole budget (napi:napi_poll work equal to budget).",
		Counter, "device", "context").documented("NAPI polls that used their whole budget (napi:napi_poll work == budget): the device had more packets than one poll may take.")
	napiOverBudget = newFamily("napi", "napi_polls_over_budget_total",
		"NAPI polls whose work exceeded their budget (napi:napi_poll work > budget), a driver bug the kernel logs once.",
		Counter, "device", "context")
	napiUntracked = newFamily("napi", "napi_polls_untracked_total",
		"NAPI polls not counted per device and context because the collector's table was full.",
		Counter).documented("NAPI polls not counted in xdp_napi_poll_work because every slot probed for their device and context was taken (the table holds 128 pairs; see docs/collectors/napi.md).")
	napiTracepointAttached = newFamily("napi", "napi_tracepoint_attached",
		"1 if the napi collector's program is attached to this tracepoint, 0 if the kernel lacks or refused it.",
		Gauge, "tracepoint").documented("1 if the napi collector's program on this tracepoint is attached, 0 if the kernel refused it (its counters are then absent).")
	napiRecursionMisses = newFamily("napi", "napi_program_recursion_misses_total",
		"Tracepoint events the kernel did not run the napi collector's program for (bpf_prog_info.recursion_misses).",
		Counter, "tracepoint").documented("Times the kernel skipped the napi collector's program on this tracepoint because a BPF program was already running on that CPU (bpf_prog_info.recursion_misses): events its counters missed.")
	softirqEntries = newFamily("napi", "napi_softirq_entries_total",
		"Softirq handler runs (irq:softirq_entry) per CPU and vector, as /proc/softirqs counts them.",
		Counter, "cpu", "vector")
	softirqRaises = newFamily("napi", "napi_softirq_raises_total",
		"Softirq raises (irq:softirq_raise) per CPU and vector; raises of an already pending vector collapse into one run.",
		Counter, "cpu", "vector")
	softirqSeconds = newFamily("napi", "napi_softirq_seconds_total",
		"Time from irq:softirq_entry to irq:softirq_exit per CPU and vector, including any hard interrupts taken meanwhile.",
		Counter, "cpu", "vector")
)

func init() {
	register(Registration{
		Name:           "napi",
		Help:           "NAPI poll bulk histogram (napi:napi_poll) and softirq counts and time per CPU (irq:softirq_*), as napi_monitor showed",
		DefaultEnabled: true,
		Requires:       "CAP_BPF and CAP_PERFMON (or root), kernel BTF (/sys/kernel/btf/vmlinux) for tp_btf programs (Linux 5.5+)",
		DeviceLabel:    true,
		// Its maps are read through bpf(2), which needs CAP_BPF before
		// Linux 5.19 where unprivileged BPF is disabled.
		ScrapeCapabilities: []int{unix.CAP_BPF},
		Flags: func(f *FlagSet) Builder {
			softirq := f.Flag("softirq", "Attach irq:softirq_entry/exit/raise for per-CPU, per-vector softirq counts, raises and time. Off by default: they run several times per NAPI poll, and the cpu collector exports softirq time and counts from procfs.").Default("false").Bool()
			vectors := f.Flag("softirq-vectors", "Comma-separated softirq vectors to export (names as in /proc/softirqs), or 'all'.").Default("all").String()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				cfg := NapiConfig{Softirq: *softirq, Filter: shared.Filter}
				if *vectors != "all" {
					cfg.SoftirqVectors = strings.Split(*vectors, ",")
				}
				return asCollector(loadNapiCollector(cfg, logger))
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
	// ForeignIdle is how long a device of another network namespace may
	// poll nothing before its slot is freed (bpf/reap); reap.DefaultIdle
	// when 0.
	ForeignIdle time.Duration
	// Filter's devices are those whose polls are reported (all are
	// counted in the kernel either way).
	Filter
}

// napiCollector owns the napi programs, their links and maps.
type napiCollector struct {
	*napi.Objects
	devices deviceFilter
	fams    familyFilter
	vectors [len(napi.SoftirqVectors)]bool
	netns   uint64 // the exporter's own network namespace inode
}

// loadNapiCollector loads and attaches the napi programs.
func loadNapiCollector(cfg NapiConfig, logger *slog.Logger) (*napiCollector, error) {
	spec, err := napi.Spec()
	if err != nil {
		return nil, err
	}
	return newNapiCollector(cfg, logger, spec)
}

// newNapiCollector attaches the programs of spec that cfg asks for (see
// tracing.Load); only when none attaches does it fail.
func newNapiCollector(cfg NapiConfig, logger *slog.Logger, spec *ebpf.CollectionSpec) (*napiCollector, error) {
	c := &napiCollector{devices: cfg.Devices, fams: cfg.Families}
	if len(cfg.SoftirqVectors) == 0 {
		for i := range c.vectors {
			c.vectors[i] = true
		}
	}
	for _, name := range cfg.SoftirqVectors {
		i := slices.Index(napi.SoftirqVectors[:], strings.TrimSpace(name))
		if i < 0 {
			return nil, fmt.Errorf("unknown softirq vector %q (want one of %s)", name, strings.Join(napi.SoftirqVectors[:], ","))
		}
		c.vectors[i] = true
	}
	netns, err := rtnl.OwnNetns()
	if err != nil {
		return nil, err
	}
	c.netns = netns
	if c.Objects, err = napi.New(spec, cfg.Softirq, cfg.ForeignIdle, logger); err != nil {
		return nil, bpfDenied("napi", needsBPF, err)
	}
	return c, nil
}

// Update emits the histogram and softirq counters. While a tracepoint is
// missing it returns ErrUnsupported or ErrUnavailable (see
// missingTracepoints; the reason was logged at startup) after emitting
// everything the attached programs feed.
func (c *napiCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	sendAttached(ch, c.fams, napiTracepointAttached, c.Set)
	var errs []error
	for _, p := range c.Progs {
		st, err := p.Prog.Stats()
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the stats of the %s program: %w", p.Tracepoint, err))
			continue
		}
		c.fams.send(ch, napiRecursionMisses, float64(st.RecursionMisses), p.Tracepoint)
	}
	if c.Attached[napi.PollTracepoint] {
		errs = append(errs, c.updatePolls(snap, ch))
	}
	if c.Attached[napi.SoftirqEntryTracepoint] || c.Attached[napi.SoftirqRaiseTracepoint] {
		errs = append(errs, c.updateSoftirqs(ch))
	}
	errs = append(errs, missingTracepoints(c.Set))
	return errors.Join(errs...)
}

func (c *napiCollector) updatePolls(snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	links, err := snap.Get()
	if links == nil {
		return err
	}
	polls, err := c.Polls(func(d reap.Device) reap.Fate { return deviceFate(links, c.netns, d) })
	if err != nil {
		return fmt.Errorf("reading the napi histogram: %w", err)
	}
	for _, p := range polls {
		device := links.Label(p.Device.Ifindex)
		if uint64(p.Device.Netns) != c.netns {
			name, err := c.RecordedName(p)
			if err != nil {
				return err
			}
			device = foreignLabel(uint64(p.Device.Netns), deviceLabel(name))
		}
		if !c.devices.selects(device) {
			continue
		}
		if c.fams.keeps(napiPollWork) {
			ch <- pollHistogram(p, device)
		}
		c.fams.send(ch, napiBudgetExhausted, float64(p.Exhausted), device, p.Context)
		c.fams.send(ch, napiOverBudget, float64(p.OverBudget), device, p.Context)
	}
	untracked, err := c.Untracked()
	if err != nil {
		return err
	}
	c.fams.send(ch, napiUntracked, float64(untracked))
	return nil
}

// pollHistogram turns per-value poll counts into cumulative le buckets.
func pollHistogram(p napi.Polls, device string) prometheus.Metric {
	buckets := make(map[float64]uint64, len(p.Polls))
	var count, work uint64
	for w, n := range p.Polls {
		count += n
		work += uint64(w) * n
		buckets[float64(w)] = count
	}
	count += p.BigPolls
	work += p.BigWork
	return prometheus.MustNewConstHistogram(napiPollWork.Desc(), count, float64(work), buckets, device, p.Context)
}

func (c *napiCollector) updateSoftirqs(ch chan<- prometheus.Metric) error {
	seconds := c.Attached[napi.SoftirqEntryTracepoint] && c.Attached[napi.SoftirqExitTracepoint]
	perVec, err := c.Softirqs()
	if err != nil {
		return err
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
		for vec, name := range napi.SoftirqVectors {
			if !c.vectors[vec] {
				continue
			}
			v := perVec[vec][cpu]
			if c.Attached[napi.SoftirqEntryTracepoint] {
				c.fams.send(ch, softirqEntries, float64(v.Entries), cpuLabel, name)
			}
			if c.Attached[napi.SoftirqRaiseTracepoint] {
				c.fams.send(ch, softirqRaises, float64(v.Raises), cpuLabel, name)
			}
			if seconds {
				c.fams.send(ch, softirqSeconds, float64(v.Ns)/1e9, cpuLabel, name)
			}
		}
	}
	return nil
}
