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

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/cpulist"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/perfevent"
)

var (
	perfCycles = newFamily("perf", "perf_cycles_total",
		"CPU cycles on the CPU, from perf event cycles, scaled for multiplexing.",
		Counter, "cpu").documented("CPU cycles counted on the CPU (perf event cycles, PERF_COUNT_HW_CPU_CYCLES), scaled for multiplexing. IPC = rate(instructions)/rate(cycles).")
	perfInstructions = newFamily("perf", "perf_instructions_total",
		"Instructions retired on the CPU, from perf event instructions, scaled for multiplexing.",
		Counter, "cpu").documented("Instructions retired on the CPU (perf event instructions, PERF_COUNT_HW_INSTRUCTIONS), scaled for multiplexing; same group as cycles.")
	perfCacheReferences = newFamily("perf", "perf_cache_references_total",
		"Last-level cache references on the CPU, from perf event cache-references, scaled for multiplexing.",
		Counter, "cpu").documented("Last-level cache references on the CPU as the PMU defines them (perf event cache-references, PERF_COUNT_HW_CACHE_REFERENCES), scaled for multiplexing.")
	perfCacheMisses = newFamily("perf", "perf_cache_misses_total",
		"Last-level cache misses on the CPU, from perf event cache-misses, scaled for multiplexing.",
		Counter, "cpu").documented("Last-level cache misses on the CPU (perf event cache-misses, PERF_COUNT_HW_CACHE_MISSES), scaled for multiplexing; same group as cache_references.")
	perfLLCLoads = newFamily("perf", "perf_llc_loads_total",
		"Last-level cache read accesses (perf event LLC-loads, PERF_TYPE_HW_CACHE LL/READ/ACCESS), scaled for multiplexing.",
		Counter, "cpu")
	perfLLCLoadMisses = newFamily("perf", "perf_llc_load_misses_total",
		"Last-level cache read misses on the CPU, from perf event LLC-load-misses, scaled for multiplexing.",
		Counter, "cpu").documented("Last-level cache read misses (perf event LLC-load-misses, PERF_TYPE_HW_CACHE LL/READ/MISS), scaled for multiplexing; same group as llc_loads.")
	perfCPUClock = newFamily("perf", "perf_cpu_clock_seconds_total",
		"Time the per-CPU cpu-clock software event counted (PERF_COUNT_SW_CPU_CLOCK): wall time while the event is enabled.",
		Counter, "cpu")
	perfTaskClock = newFamily("perf", "perf_task_clock_seconds_total",
		"Time the per-CPU task-clock software event counted (PERF_COUNT_SW_TASK_CLOCK).",
		Counter, "cpu")
	perfContextSwitches = newFamily("perf", "perf_context_switches_total",
		"Context switches on the CPU (perf event context-switches, PERF_COUNT_SW_CONTEXT_SWITCHES).",
		Counter, "cpu")
	perfCPUMigrations = newFamily("perf", "perf_cpu_migrations_total",
		"Tasks migrated to the CPU (perf event cpu-migrations, PERF_COUNT_SW_CPU_MIGRATIONS).",
		Counter, "cpu")
	perfPageFaults = newFamily("perf", "perf_page_faults_total",
		"Page faults on the CPU (perf event page-faults, PERF_COUNT_SW_PAGE_FAULTS).",
		Counter, "cpu")
	perfGroupEnabled = newFamily("perf", "perf_group_enabled_seconds_total",
		"time_enabled of the event group on the CPU (perf_event_open read_format): how long it was enabled.",
		Counter, "cpu", "group")
	perfGroupRunning = newFamily("perf", "perf_group_running_seconds_total",
		"Time the perf event group was on the PMU (perf_event_open time_running).",
		Counter, "cpu", "group").documented("time_running of the event group on the CPU (perf_event_open read_format): how long it was on the PMU; running/enabled < 1 means the counts were multiplexed and scaled.")
	perfEventAvailable = newFamily("perf", "perf_event_available",
		"1 if the perf event was opened on every selected CPU, 0 if refused or not supported.",
		Gauge, "event").documented("1 if the perf event was opened on every selected CPU, 0 if the host does not support it or it was refused (see the startup log).")
)

func init() {
	register(Registration{
		Name:           "perf",
		Help:           "Per-CPU hardware (cycles, instructions, cache and LLC) and software perf events through perf_event_open",
		DefaultEnabled: false,
		Requires:       "perf_event_open (CONFIG_PERF_EVENTS); CPU-wide events need CAP_PERFMON (Linux 5.8+) or CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= 0; hardware events need a PMU the kernel drives (most VMs have none: then only the software events are exported).",
		Flags: func(f *FlagSet) Builder {
			cpus := f.Flag("cpus", `CPUs to count on, in the kernel's cpulist format ("0-3,8"); default: every online CPU.`).Default("").String()
			hw := f.Flag("hardware", "Open the hardware counter groups (cycles/instructions, cache-references/misses, LLC loads/misses).").Default("true").Bool()
			sw := f.Flag("software", "Open the software event group (cpu-clock, task-clock, context-switches, cpu-migrations, page-faults).").Default("true").Bool()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				cfg := PerfConfig{Hardware: *hw, Software: *sw, SysFS: shared.SysFS, Filter: shared.Filter}
				if *cpus != "" {
					list, err := cpulist.Parse(*cpus)
					if err != nil {
						return nil, fmt.Errorf("--collector.perf.cpus: %w", err)
					}
					cfg.CPUs = list
				}
				return asCollector(newPerfCollector(cfg, logger))
			}
		},
	})
}

// PerfConfig configures the perf collector.
type PerfConfig struct {
	// CPUs to count on; nil means every online CPU.
	CPUs []int
	// Hardware opens the hardware groups, Software the software group.
	Hardware, Software bool
	// SysFS is the sysfs mount point, for devices/system/cpu/online;
	// /sys when empty.
	SysFS string
	Filter
}

type perfEventSpec struct {
	perfevent.Event
	fam   *Family
	scale float64 // to base units: clocks count nanoseconds
}

// perfGroupSpec is one group opened on each CPU. The hardware events come
// in pairs, each pair its own group: a group is scheduled on the PMU all or
// nothing, so one group of six hardware events would never count on a PMU
// with fewer free counters (four general counters, one of them often held
// by the NMI watchdog), while a pair always fits. Each ratio the dashboards
// compute (IPC, cache-miss ratio, LLC miss ratio) is inside one pair, so its
// numerator and denominator were counted over exactly the same time.
type perfGroupSpec struct {
	name     string
	hardware bool
	events   []perfEventSpec
}

var perfGroups = []perfGroupSpec{
	{"cycles", true, []perfEventSpec{
		{perfevent.Event{Name: "cycles", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CPU_CYCLES}, perfCycles, 1},
		{perfevent.Event{Name: "instructions", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_INSTRUCTIONS}, perfInstructions, 1},
	}},
	{"cache", true, []perfEventSpec{
		{perfevent.Event{Name: "cache-references", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CACHE_REFERENCES}, perfCacheReferences, 1},
		{perfevent.Event{Name: "cache-misses", Type: unix.PERF_TYPE_HARDWARE, Config: unix.PERF_COUNT_HW_CACHE_MISSES}, perfCacheMisses, 1},
	}},
	{"llc", true, []perfEventSpec{
		{perfevent.Event{Name: "LLC-loads", Type: unix.PERF_TYPE_HW_CACHE, Config: perfevent.HWCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS)}, perfLLCLoads, 1},
		{perfevent.Event{Name: "LLC-load-misses", Type: unix.PERF_TYPE_HW_CACHE, Config: perfevent.HWCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_MISS)}, perfLLCLoadMisses, 1},
	}},
	{"software", false, []perfEventSpec{
		{perfevent.Event{Name: "cpu-clock", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK}, perfCPUClock, 1e-9},
		{perfevent.Event{Name: "task-clock", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_TASK_CLOCK}, perfTaskClock, 1e-9},
		{perfevent.Event{Name: "context-switches", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CONTEXT_SWITCHES}, perfContextSwitches, 1},
		{perfevent.Event{Name: "cpu-migrations", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_MIGRATIONS}, perfCPUMigrations, 1},
		{perfevent.Event{Name: "page-faults", Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_PAGE_FAULTS}, perfPageFaults, 1},
	}},
}

// perfGroup is one group open on one CPU.
type perfGroup struct {
	spec   *perfGroupSpec
	cpu    string
	group  *perfevent.Group
	scaler perfevent.Scaler
}

// perfCollector holds one event group per (group, CPU).
type perfCollector struct {
	fams      familyFilter
	mu        sync.Mutex // Update may run concurrently; reads share buf and scaler
	groups    []*perfGroup
	available map[string]bool // perf event name -> opened on every CPU
	logger    *slog.Logger
}

// newPerfCollector opens the configured groups on every selected CPU. A
// group the host cannot count (no PMU, event unknown) is logged once and
// left out; the constructor fails only when no group could be opened at all.
func newPerfCollector(cfg PerfConfig, logger *slog.Logger) (*perfCollector, error) {
	cfg.SysFS = sysRoot(cfg.SysFS)
	cpus := cfg.CPUs
	if cpus == nil {
		var err error
		if cpus, err = cpulist.Online(cfg.SysFS); err != nil {
			return nil, fmt.Errorf("perf: listing online CPUs: %w", err)
		}
	}
	c := &perfCollector{available: map[string]bool{}, fams: cfg.Families, logger: logger}
	var errs []error
	hwMissing := 0
	hwRequested := 0
	for i := range perfGroups {
		spec := &perfGroups[i]
		if (spec.hardware && !cfg.Hardware) || (!spec.hardware && !cfg.Software) {
			continue
		}
		if spec.hardware {
			hwRequested++
		}
		opened, err := openPerfGroupAllCPUs(spec, cpus)
		for _, e := range spec.events {
			c.available[e.Name] = err == nil
		}
		if err != nil {
			errs = append(errs, err)
			if spec.hardware && perfevent.IsUnsupported(err) {
				hwMissing++
			} else {
				logger.Warn("perf event group unavailable; its families are not exported", "group", spec.name, "err", err)
			}
			continue
		}
		c.groups = append(c.groups, opened...)
	}
	if hwMissing > 0 {
		msg := "some hardware perf counters are not supported on this host; those families are not exported"
		if hwMissing == hwRequested {
			msg = "hardware perf counters are not supported on this host (no PMU exposed, as in most VMs): cycles, instructions and cache families are not exported; software events still are"
		}
		logger.Warn(msg, "err", errors.Join(errs...))
	}
	if len(c.groups) == 0 {
		return nil, fmt.Errorf("perf: no event group could be opened: %w", errors.Join(errs...))
	}
	return c, nil
}

// openPerfGroupAllCPUs opens spec on each CPU, or on none.
func openPerfGroupAllCPUs(spec *perfGroupSpec, cpus []int) ([]*perfGroup, error) {
	events := make([]perfevent.Event, len(spec.events))
	for i, e := range spec.events {
		events[i] = e.Event
	}
	groups, err := perfevent.OpenOnCPUs(spec.name, events, cpus)
	out := make([]*perfGroup, len(groups))
	for i, g := range groups {
		out[i] = &perfGroup{spec: spec, cpu: strconv.Itoa(cpus[i]), group: g}
	}
	return out, err
}

// Update reads every group; a group that fails to read is reported in the
// error and the others still emit.
func (c *perfCollector) Update(_ context.Context, _ *LinkSnapshot, ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		return errors.New("perf: collector closed")
	}
	var errs []error
	for _, g := range c.groups {
		r, scaled, err := g.group.ReadScaled(&g.scaler)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for i, e := range g.spec.events {
			c.fams.send(ch, e.fam, scaled[i]*e.scale, g.cpu)
		}
		c.fams.send(ch, perfGroupEnabled, float64(r.Enabled)*1e-9, g.cpu, g.spec.name)
		c.fams.send(ch, perfGroupRunning, float64(r.Running)*1e-9, g.cpu, g.spec.name)
	}
	for name, ok := range c.available {
		v := 0.0
		if ok {
			v = 1
		}
		c.fams.send(ch, perfEventAvailable, v, name)
	}
	return errors.Join(errs...)
}

// Close closes every perf event fd. It is safe to call more than once.
func (c *perfCollector) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for _, g := range c.groups {
		if err := g.group.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.groups = nil
	return errors.Join(errs...)
}
