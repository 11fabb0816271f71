package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"

	"github.com/xdp-exporter/xdp_exporter/collector/internal/counter32"
)

var (
	cpuSeconds = newFamily("cpu", "cpu_seconds_total",
		"Seconds each CPU spent in each mode, from /proc/stat.",
		Counter, "cpu", "mode").documented("Seconds each CPU spent in each mode, from the cpuN lines of /proc/stat (USER_HZ ticks / USER_HZ). user includes guest time, nice includes guest_nice, as the kernel counts them.")
	cpuSoftirqs = newFamily("cpu", "cpu_softirqs_total",
		"Softirq vectors raised on each CPU, from /proc/softirqs.",
		Counter, "cpu", "vector").documented("Softirq vectors raised on each CPU, from /proc/softirqs (NET_RX and NET_TX unless --collector.cpu.softirqs.all).")
	softnetProcessed = newFamily("cpu", "cpu_softnet_processed_total",
		"Packets the CPU's backlog and NAPI receive path processed, from /proc/net/softnet_stat column 1.",
		Counter, "cpu").documented("Packets processed by the CPU's backlog/NAPI receive path, column 1 of /proc/net/softnet_stat, kept as a 64-bit total across the kernel counter's 32-bit wraps.")
	softnetDropped = newFamily("cpu", "cpu_softnet_dropped_total",
		"Packets dropped because the CPU's input backlog was full (netdev_max_backlog), column 2 of /proc/net/softnet_stat.",
		Counter, "cpu")
	softnetTimesSqueezed = newFamily("cpu", "cpu_softnet_times_squeezed_total",
		"NET_RX softirq runs that ended with work left as the budget ran out, from /proc/net/softnet_stat column 3.",
		Counter, "cpu").documented("NET_RX softirq runs that ended with work left because the budget (netdev_budget, netdev_budget_usecs) ran out, column 3 of /proc/net/softnet_stat.")
)

func init() {
	register(Registration{
		Name:           "cpu",
		Help:           "Per-CPU time by mode, NET_RX/NET_TX softirqs and softnet backlog statistics from procfs",
		DefaultEnabled: true,
		Requires:       "any Linux kernel with /proc/stat and /proc/softirqs; the softnet CPU index column needs Linux 5.14+ (older kernels: line number); no privileges.",
		Flags: func(f *FlagSet) Builder {
			all := f.Flag("softirqs.all", "Export every /proc/softirqs vector, not only NET_RX and NET_TX (adds 8 series per CPU).").Default("false").Bool()
			modes := f.Flag("modes", "Regexp (anchored) of the /proc/stat modes of xdp_cpu_seconds_total to export (user nice system idle iowait irq softirq steal); empty: all.").Default(DefaultCPUModes).Regexp()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return asCollector(newCPUCollector(CPUConfig{ProcFS: shared.ProcFS, SoftirqsAll: *all, Modes: *modes, Filter: shared.Filter}, logger))
			}
		},
	})
}

// CPUConfig configures the cpu collector.
type CPUConfig struct {
	// ProcFS is the procfs mount point (tests point it at fixtures);
	// /proc when empty.
	ProcFS string
	// SoftirqsAll exports every softirq vector instead of NET_RX and NET_TX.
	SoftirqsAll bool
	// Modes selects the modes of xdp_cpu_seconds_total (anchored); nil
	// exports all eight.
	Modes *regexp.Regexp
	Filter
}

// DefaultCPUModes are the modes of xdp_cpu_seconds_total exported by
// default: the columns of mpstat that an XDP run reads (%usr, %sys, %irq,
// %soft, %steal, %idle). nice and iowait are left out, a quarter of the
// family's series (256 on a 128-CPU host): a CPU busy with packets is
// in softirq, and iowait is idle time that the kernel guesses a task
// waits in; node_exporter's node_cpu_seconds_total has both.
const DefaultCPUModes = "user|system|idle|irq|softirq|steal"

// cpuCollector reads /proc/stat, /proc/softirqs and /proc/net/softnet_stat.
// It holds no open files between scrapes.
type cpuCollector struct {
	fs      procfs.FS
	cfg     CPUConfig
	logger  *slog.Logger
	softnet counter32.Extender[softnetKey]
	// modes are the indexes into cpuModes that cfg.Modes selects.
	modes []int
}

// newCPUCollector checks that cfg.ProcFS is a directory and returns the collector.
func newCPUCollector(cfg CPUConfig, logger *slog.Logger) (*cpuCollector, error) {
	cfg.ProcFS = procRoot(cfg.ProcFS)
	fs, err := procfs.NewFS(cfg.ProcFS)
	if err != nil {
		return nil, fmt.Errorf("cpu: procfs at %q: %w", cfg.ProcFS, err)
	}
	c := &cpuCollector{fs: fs, cfg: cfg, logger: logger}
	modes := anchor(cfg.Modes)
	for i, m := range cpuModes {
		if modes == nil || modes.MatchString(m) {
			c.modes = append(c.modes, i)
		}
	}
	return c, nil
}

// Update reads the three files independently: one that is missing or
// malformed is reported in the returned error while the others still emit.
func (c *cpuCollector) Update(_ context.Context, _ *LinkSnapshot, ch chan<- prometheus.Metric) error {
	var errs []error
	if err := c.updateStat(ch); err != nil {
		errs = append(errs, fmt.Errorf("%s/stat: %w", c.cfg.ProcFS, err))
	}
	if err := c.updateSoftirqs(ch); err != nil {
		errs = append(errs, fmt.Errorf("%s/softirqs: %w", c.cfg.ProcFS, err))
	}
	if err := c.updateSoftnet(ch); err != nil {
		errs = append(errs, fmt.Errorf("%s/net/softnet_stat: %w", c.cfg.ProcFS, err))
	}
	return errors.Join(errs...)
}

// Close releases nothing: every file is opened and closed within Update.
func (c *cpuCollector) Close() error { return nil }

func (c *cpuCollector) updateStat(ch chan<- prometheus.Metric) error {
	st, err := c.fs.Stat()
	if err != nil {
		return err
	}
	if len(st.CPU) == 0 {
		return errors.New("no cpuN lines")
	}
	// procfs reads the fields with %f, which also takes "-1", "NaN" and
	// "Inf". The kernel prints tick counts, so such a value means a
	// malformed file, not a counter to export (FuzzCPUProcfs regression
	// inputs negative-ticks, nan-ticks).
	for id, s := range st.CPU {
		for _, v := range []float64{s.User, s.Nice, s.System, s.Idle, s.Iowait, s.IRQ, s.SoftIRQ, s.Steal} {
			if !(v >= 0) || math.IsInf(v, 1) {
				return fmt.Errorf("cpu%d: time %v s is not a count of ticks", id, v)
			}
		}
	}
	for id, s := range st.CPU {
		cpu := strconv.FormatInt(id, 10)
		times := [len(cpuModes)]float64{s.User, s.Nice, s.System, s.Idle, s.Iowait, s.IRQ, s.SoftIRQ, s.Steal}
		for _, m := range c.modes {
			c.cfg.Families.send(ch, cpuSeconds, times[m], cpu, cpuModes[m])
		}
	}
	return nil
}

// cpuModes are the modes of /proc/stat's cpuN lines, in their order.
var cpuModes = [...]string{"user", "nice", "system", "idle", "iowait", "irq", "softirq", "steal"}

// updateSoftirqs labels column i of /proc/softirqs as cpu i. The kernel
// prints one column per possible CPU (for_each_possible_cpu), and
// cpu_possible_mask is dense from 0, so the column index is the CPU number.
func (c *cpuCollector) updateSoftirqs(ch chan<- prometheus.Metric) error {
	s, err := c.fs.Softirqs()
	if err != nil {
		return err
	}
	vectors := []struct {
		name   string
		counts []uint64
	}{
		{"NET_RX", s.NetRx},
		{"NET_TX", s.NetTx},
	}
	if c.cfg.SoftirqsAll {
		vectors = append(vectors, []struct {
			name   string
			counts []uint64
		}{
			{"HI", s.Hi}, {"TIMER", s.Timer}, {"BLOCK", s.Block}, {"IRQ_POLL", s.IRQPoll},
			{"TASKLET", s.Tasklet}, {"SCHED", s.Sched}, {"HRTIMER", s.HRTimer}, {"RCU", s.RCU},
		}...)
	}
	for _, v := range vectors {
		if len(v.counts) == 0 {
			return fmt.Errorf("no %s row", v.name)
		}
	}
	for _, v := range vectors {
		for i, n := range v.counts {
			c.cfg.Families.send(ch, cpuSoftirqs, float64(n), strconv.Itoa(i), v.name)
		}
	}
	return nil
}

func (c *cpuCollector) updateSoftnet(ch chan<- prometheus.Metric) error {
	rows, err := c.fs.NetSoftnetStat()
	if err != nil {
		return err
	}
	if len(rows) == 0 {
		return errors.New("empty file")
	}
	seen := make(map[uint32]bool, len(rows))
	for _, r := range rows {
		if seen[r.Index] {
			return fmt.Errorf("CPU %d appears twice", r.Index)
		}
		seen[r.Index] = true
	}
	for _, r := range rows {
		cpu := strconv.FormatUint(uint64(r.Index), 10)
		c.cfg.Families.send(ch, softnetProcessed, float64(c.softnet.Extend(softnetKey{r.Index, 0}, r.Processed)), cpu)
		c.cfg.Families.send(ch, softnetDropped, float64(c.softnet.Extend(softnetKey{r.Index, 1}, r.Dropped)), cpu)
		c.cfg.Families.send(ch, softnetTimesSqueezed, float64(c.softnet.Extend(softnetKey{r.Index, 2}, r.TimeSqueezed)), cpu)
	}
	return nil
}

// softnetKey is one softnet_stat counter: a CPU and a column.
type softnetKey struct{ cpu, column uint32 }
