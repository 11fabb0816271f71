package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/cilium/ebpf"
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
		Histogram, "device", "context")
	napiBudgetExhausted = newFamily("napi", "polls_budget_exhausted_total",
		"NAPI polls that used their whole budget (napi:napi_poll work == budget): the device had more packets than one poll may take.",
		Counter, "device", "context")
	napiOverBudget = newFamily("napi", "polls_over_budget_total",
		"NAPI polls whose work exceeded their budget (napi:napi_poll work > budget), a driver bug the kernel logs once.",
		Counter, "device", "context")
	napiUntracked = newFamily("napi", "polls_untracked_total",
		"NAPI polls not counted in xdp_napi_poll_work because every slot probed for their device and context was taken (the table holds 128 pairs; see docs/collectors/napi.md).",
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

// napiPrograms are the programs of bpf/napi.c; napiSoftirq those attached
// only with NapiConfig.Softirq.
var napiPrograms = []tracepointProgram{
	{prog: bpf.NapiProgNapiPoll, params: []string{"struct napi_struct *", "int", "int"}},
	{prog: bpf.NapiProgSoftirqEntry, params: []string{"unsigned int"}},
	{prog: bpf.NapiProgSoftirqExit, params: []string{"unsigned int"}},
	{prog: bpf.NapiProgSoftirqRaise, params: []string{"unsigned int"}},
}

var napiSoftirq = map[string]bool{bpf.NapiProgSoftirqEntry: true, bpf.NapiProgSoftirqExit: true, bpf.NapiProgSoftirqRaise: true}

// napiGroup is the tracefs group of a napi program's tracepoint.
func napiGroup(prog string) string {
	if napiSoftirq[prog] {
		return "irq"
	}
	return "napi"
}

func init() {
	register(Registration{
		Name:           "napi",
		Help:           "NAPI poll bulk histogram (napi:napi_poll) and softirq counts and time per CPU (irq:softirq_*), as napi_monitor showed",
		DefaultEnabled: true,
		Requires:       "CAP_BPF and CAP_PERFMON (or root), kernel BTF (/sys/kernel/btf/vmlinux) for tp_btf programs (Linux 5.5+)",
		DeviceLabel:    true,
		Flags: func(f *FlagSet) Builder {
			softirq := f.Flag("softirq", "Attach irq:softirq_entry/exit/raise for per-CPU, per-vector softirq counts, raises and time. Off by default: they run several times per NAPI poll, and the cpu collector exports softirq time and counts from procfs.").Default("false").Bool()
			vectors := f.Flag("softirq-vectors", "Comma-separated softirq vectors to export (names as in /proc/softirqs), or 'all'.").Default("all").String()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				cfg := NapiConfig{Softirq: *softirq, Filter: shared.Filter}
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
	// ForeignIdle is how long a device of another network namespace may
	// poll nothing before its slot is freed (reap.go); foreignIdle when 0.
	ForeignIdle time.Duration
	// Filter's devices are those whose polls are reported (all are
	// counted in the kernel either way).
	Filter
}

// napiCollector owns the napi programs, their links and maps.
type napiCollector struct {
	*tracepointSet
	devices deviceFilter
	fams    familyFilter
	vectors [len(softirqVectors)]bool
	netns   uint64 // the exporter's own network namespace inode
	reaper  *reaper[slotKey]
}

// NewNapiCollector loads and attaches the napi programs.
func NewNapiCollector(cfg NapiConfig, logger *slog.Logger) (Collector, error) {
	return asCollector(loadNapiCollector(cfg, logger))
}

func loadNapiCollector(cfg NapiConfig, logger *slog.Logger) (*napiCollector, error) {
	spec, err := bpf.LoadNapi()
	if err != nil {
		return nil, err
	}
	return newNapiCollector(cfg, logger, spec)
}

// newNapiCollector attaches the programs of spec that cfg asks for (see
// tracepointSet); only when none attaches does it fail.
func newNapiCollector(cfg NapiConfig, logger *slog.Logger, spec *ebpf.CollectionSpec) (*napiCollector, error) {
	c := &napiCollector{reaper: newReaper[slotKey](cfg.ForeignIdle), devices: cfg.Devices, fams: cfg.Families}
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
	netns, err := ownNetns()
	if err != nil {
		return nil, err
	}
	c.netns = netns
	var progs []tracepointProgram
	for _, p := range napiPrograms {
		if !napiSoftirq[p.prog] || cfg.Softirq {
			progs = append(progs, p)
		}
	}
	if c.tracepointSet, err = loadTracepoints("napi", logger, spec, progs, napiGroup); err != nil {
		return nil, err
	}
	return c, nil
}

func vectorIndex(name string) int {
	for i, v := range softirqVectors {
		if v == name {
			return i
		}
	}
	return -1
}

// Update emits the histogram and softirq counters. While a tracepoint is
// missing it returns ErrUnsupported or ErrUnavailable (see missingErr; the
// reason was logged at startup) after emitting everything the attached
// programs feed.
func (c *napiCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	c.emitAttached(ch, c.fams, napiTracepointAttached)
	var errs []error
	for _, p := range c.progs {
		st, err := p.prog.Stats()
		if err != nil {
			errs = append(errs, fmt.Errorf("reading the stats of the %s program: %w", p.tracepoint, err))
			continue
		}
		c.fams.send(ch, napiRecursionMisses, float64(st.RecursionMisses), p.tracepoint)
	}
	if c.attached["napi:napi_poll"] {
		errs = append(errs, c.updatePolls(ctx, snap, ch))
	}
	if c.attached["irq:softirq_entry"] || c.attached["irq:softirq_raise"] {
		errs = append(errs, c.updateSoftirqs(ch))
	}
	errs = append(errs, c.missingErr())
	return errors.Join(errs...)
}

// napiSeries is one histogram: a device in a namespace and a context.
type napiSeries struct {
	polls                 [napiMaxWork + 1]uint64
	bigPolls, bigWork     uint64
	exhausted, overBudget uint64
	device, context       string
}

func (c *napiCollector) updatePolls(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	owners, hist := c.maps[bpf.NapiMapNapiOwners], c.maps[bpf.NapiMapNapiHist]
	slots, err := readSlots[bpf.NapiNapiVal](owners, hist)
	if err != nil {
		return fmt.Errorf("reading the napi histogram: %w", err)
	}
	links, err := snap.Get()
	if links == nil {
		return err
	}
	table := slotTable{owners: owners, claims: c.maps[bpf.NapiMapNapiClaims], values: hist}
	slots, err = reapSlots(c.reaper, table, slots, napiPolls, func(k slotKey) fate {
		return deviceFate(links, c.netns, k.k0, uint32(k.k1>>2))
	})
	if err != nil {
		return fmt.Errorf("freeing the napi slots of devices that are gone: %w", err)
	}
	for _, e := range slots {
		ifindex := uint32(e.key.k1 >> 2)
		s := napiSeries{context: "unknown"}
		if e.key.k0 == c.netns {
			s.device = links.Label(ifindex)
		} else {
			// The exporter cannot see names in another namespace: the
			// name the device had when its slot was claimed.
			var n bpf.NapiDevName
			if err := c.maps[bpf.NapiMapNapiNames].Lookup(e.index[0], &n); err != nil {
				return fmt.Errorf("reading a napi device name: %w", err)
			}
			s.device = foreignLabel(e.key.k0, deviceLabel(recordedName(n.Dev)))
		}
		if !c.devices.selects(s.device) {
			continue
		}
		if ctx := int(e.key.k1 & 3); ctx < len(napiContexts) {
			s.context = napiContexts[ctx]
		}
		for _, perCPU := range e.slots {
			for _, v := range perCPU {
				for w, n := range v.Polls {
					s.polls[w] += n
				}
				s.bigPolls += v.BigPolls
				s.bigWork += v.BigWork
				s.exhausted += v.Exhausted
				s.overBudget += v.OverBudget
			}
		}
		if c.fams.keeps(napiPollWork) {
			ch <- s.histogram()
		}
		c.fams.send(ch, napiBudgetExhausted, float64(s.exhausted), s.device, s.context)
		c.fams.send(ch, napiOverBudget, float64(s.overBudget), s.device, s.context)
	}
	var dropped []uint64
	if err := c.maps[bpf.NapiMapNapiDropped].Lookup(uint32(0), &dropped); err != nil {
		return fmt.Errorf("reading the untracked poll count: %w", err)
	}
	c.fams.send(ch, napiUntracked, float64(perCPUSum(dropped)))
	return nil
}

// napiPolls is a slot's poll count, the activity reap.go watches.
func napiPolls(e slotCounts[bpf.NapiNapiVal]) uint64 {
	var n uint64
	for _, perCPU := range e.slots {
		for _, v := range perCPU {
			n += v.BigPolls
			for _, p := range v.Polls {
				n += p
			}
		}
	}
	return n
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
	return prometheus.MustNewConstHistogram(napiPollWork.Desc(), count, float64(work), buckets, s.device, s.context)
}

func (c *napiCollector) updateSoftirqs(ch chan<- prometheus.Metric) error {
	seconds := c.attached["irq:softirq_entry"] && c.attached["irq:softirq_exit"]
	perVec := make([][]bpf.NapiSoftirqVal, len(softirqVectors))
	for vec := range softirqVectors {
		if err := c.maps[bpf.NapiMapSoftirqs].Lookup(uint32(vec), &perVec[vec]); err != nil {
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
				c.fams.send(ch, softirqEntries, float64(v.Entries), cpuLabel, name)
			}
			if c.attached["irq:softirq_raise"] {
				c.fams.send(ch, softirqRaises, float64(v.Raises), cpuLabel, name)
			}
			if seconds {
				c.fams.send(ch, softirqSeconds, float64(v.Ns)/1e9, cpuLabel, name)
			}
		}
	}
	return nil
}

// perCPUSum adds up the per-CPU copies of a BPF counter.
func perCPUSum(xs []uint64) uint64 {
	var t uint64
	for _, x := range xs {
		t += x
	}
	return t
}

// recordedName turns the two words of a device name a program recorded
// (struct dev_name of bpf/slots.h) back into the NUL-terminated name
// they hold (the programs are little endian only).
func recordedName(words [2]uint64) string {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[:8], words[0])
	binary.LittleEndian.PutUint64(b[8:], words[1])
	return unix.ByteSliceToString(b[:])
}
