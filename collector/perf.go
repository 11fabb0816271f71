package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

var (
	perfCycles = newFamily("perf", "cycles_total",
		"CPU cycles counted on the CPU (perf event cycles, PERF_COUNT_HW_CPU_CYCLES), scaled for multiplexing. IPC = rate(instructions)/rate(cycles).",
		Counter, "cpu")
	perfInstructions = newFamily("perf", "instructions_total",
		"Instructions retired on the CPU (perf event instructions, PERF_COUNT_HW_INSTRUCTIONS), scaled for multiplexing; same group as cycles.",
		Counter, "cpu")
	perfCacheReferences = newFamily("perf", "cache_references_total",
		"Last-level cache references on the CPU as the PMU defines them (perf event cache-references, PERF_COUNT_HW_CACHE_REFERENCES), scaled for multiplexing.",
		Counter, "cpu")
	perfCacheMisses = newFamily("perf", "cache_misses_total",
		"Last-level cache misses on the CPU (perf event cache-misses, PERF_COUNT_HW_CACHE_MISSES), scaled for multiplexing; same group as cache_references.",
		Counter, "cpu")
	perfLLCLoads = newFamily("perf", "llc_loads_total",
		"Last-level cache read accesses (perf event LLC-loads, PERF_TYPE_HW_CACHE LL/READ/ACCESS), scaled for multiplexing.",
		Counter, "cpu")
	perfLLCLoadMisses = newFamily("perf", "llc_load_misses_total",
		"Last-level cache read misses (perf event LLC-load-misses, PERF_TYPE_HW_CACHE LL/READ/MISS), scaled for multiplexing; same group as llc_loads.",
		Counter, "cpu")
	perfCPUClock = newFamily("perf", "cpu_clock_seconds_total",
		"Time the per-CPU cpu-clock software event counted (PERF_COUNT_SW_CPU_CLOCK): wall time while the event is enabled.",
		Counter, "cpu")
	perfTaskClock = newFamily("perf", "task_clock_seconds_total",
		"Time the per-CPU task-clock software event counted (PERF_COUNT_SW_TASK_CLOCK).",
		Counter, "cpu")
	perfContextSwitches = newFamily("perf", "context_switches_total",
		"Context switches on the CPU (perf event context-switches, PERF_COUNT_SW_CONTEXT_SWITCHES).",
		Counter, "cpu")
	perfCPUMigrations = newFamily("perf", "cpu_migrations_total",
		"Tasks migrated to the CPU (perf event cpu-migrations, PERF_COUNT_SW_CPU_MIGRATIONS).",
		Counter, "cpu")
	perfPageFaults = newFamily("perf", "page_faults_total",
		"Page faults on the CPU (perf event page-faults, PERF_COUNT_SW_PAGE_FAULTS).",
		Counter, "cpu")
	perfGroupEnabled = newFamily("perf", "group_enabled_seconds_total",
		"time_enabled of the event group on the CPU (perf_event_open read_format): how long it was enabled.",
		Counter, "cpu", "group")
	perfGroupRunning = newFamily("perf", "group_running_seconds_total",
		"time_running of the event group on the CPU (perf_event_open read_format): how long it was on the PMU; running/enabled < 1 means the counts were multiplexed and scaled.",
		Counter, "cpu", "group")
	perfEventAvailable = newFamily("perf", "event_available",
		"1 if the perf event was opened on every selected CPU, 0 if the host does not support it or it was refused (see the startup log).",
		Gauge, "event")
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
					list, err := parseCPUList(*cpus)
					if err != nil {
						return nil, fmt.Errorf("--collector.perf.cpus: %w", err)
					}
					cfg.CPUs = list
				}
				return NewPerfCollector(cfg, logger)
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
	name   string // perf(1)'s name
	typ    uint32
	config uint64
	fam    *Family
	scale  float64 // to base units: clocks count nanoseconds
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

func hwCache(cache, op, result uint64) uint64 { return cache | op<<8 | result<<16 }

var perfGroups = []perfGroupSpec{
	{"cycles", true, []perfEventSpec{
		{"cycles", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CPU_CYCLES, perfCycles, 1},
		{"instructions", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_INSTRUCTIONS, perfInstructions, 1},
	}},
	{"cache", true, []perfEventSpec{
		{"cache-references", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_REFERENCES, perfCacheReferences, 1},
		{"cache-misses", unix.PERF_TYPE_HARDWARE, unix.PERF_COUNT_HW_CACHE_MISSES, perfCacheMisses, 1},
	}},
	{"llc", true, []perfEventSpec{
		{"LLC-loads", unix.PERF_TYPE_HW_CACHE, hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_ACCESS), perfLLCLoads, 1},
		{"LLC-load-misses", unix.PERF_TYPE_HW_CACHE, hwCache(unix.PERF_COUNT_HW_CACHE_LL, unix.PERF_COUNT_HW_CACHE_OP_READ, unix.PERF_COUNT_HW_CACHE_RESULT_MISS), perfLLCLoadMisses, 1},
	}},
	{"software", false, []perfEventSpec{
		{"cpu-clock", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_CLOCK, perfCPUClock, 1e-9},
		{"task-clock", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_TASK_CLOCK, perfTaskClock, 1e-9},
		{"context-switches", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CONTEXT_SWITCHES, perfContextSwitches, 1},
		{"cpu-migrations", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_CPU_MIGRATIONS, perfCPUMigrations, 1},
		{"page-faults", unix.PERF_TYPE_SOFTWARE, unix.PERF_COUNT_SW_PAGE_FAULTS, perfPageFaults, 1},
	}},
}

// perfGroup is one group open on one CPU.
type perfGroup struct {
	spec   *perfGroupSpec
	cpu    string
	fds    []int    // leader first
	ids    []uint64 // kernel event ids, in spec order
	buf    []byte
	scaler perfScaler
}

// perfCollector holds one event group per (group, CPU).
type perfCollector struct {
	fams      familyFilter
	mu        sync.Mutex // Update may run concurrently; reads share buf and scaler
	groups    []*perfGroup
	available map[string]bool // perf event name -> opened on every CPU
	logger    *slog.Logger
}

// NewPerfCollector opens the configured groups on every selected CPU. A
// group the host cannot count (no PMU, event unknown) is logged once and
// left out; the constructor fails only when no group could be opened at all.
func NewPerfCollector(cfg PerfConfig, logger *slog.Logger) (Collector, error) {
	return asCollector(newPerfCollector(cfg, logger))
}

func newPerfCollector(cfg PerfConfig, logger *slog.Logger) (*perfCollector, error) {
	if cfg.SysFS == "" {
		cfg.SysFS = "/sys"
	}
	cpus := cfg.CPUs
	if cpus == nil {
		b, err := os.ReadFile(filepath.Join(cfg.SysFS, "devices", "system", "cpu", "online"))
		if err != nil {
			return nil, fmt.Errorf("perf: listing online CPUs: %w", err)
		}
		if cpus, err = parseCPUList(string(b)); err != nil {
			return nil, fmt.Errorf("perf: %s/devices/system/cpu/online: %w", cfg.SysFS, err)
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
			c.available[e.name] = err == nil
		}
		if err != nil {
			errs = append(errs, err)
			if spec.hardware && isPerfUnsupported(err) {
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

// openPerfGroupAllCPUs opens spec on each CPU, or nothing: a group missing
// on some CPUs would make per-CPU comparisons misleading.
func openPerfGroupAllCPUs(spec *perfGroupSpec, cpus []int) ([]*perfGroup, error) {
	var out []*perfGroup
	for _, cpu := range cpus {
		g, err := openPerfGroup(spec, cpu)
		if err != nil {
			for _, o := range out {
				o.close()
			}
			return nil, err
		}
		out = append(out, g)
	}
	return out, nil
}

func openPerfGroup(spec *perfGroupSpec, cpu int) (_ *perfGroup, err error) {
	g := &perfGroup{spec: spec, cpu: strconv.Itoa(cpu), buf: make([]byte, perfReadSize(perfReadFormat, len(spec.events)))}
	defer func() {
		if err != nil {
			g.close()
		}
	}()
	for i, e := range spec.events {
		attr := unix.PerfEventAttr{
			Type:        e.typ,
			Config:      e.config,
			Size:        uint32(unsafe.Sizeof(unix.PerfEventAttr{})),
			Read_format: perfReadFormat,
		}
		leader := -1
		if i == 0 {
			// The leader starts disabled and is enabled with the whole
			// group once every member is attached, so all start together.
			attr.Bits = unix.PerfBitDisabled
		} else {
			leader = g.fds[0]
		}
		fd, err := unix.PerfEventOpen(&attr, -1, cpu, leader, unix.PERF_FLAG_FD_CLOEXEC)
		if err != nil {
			return nil, perfOpenError(e.name, cpu, err)
		}
		g.fds = append(g.fds, fd)
		id, err := unix.IoctlGetUint64(fd, unix.PERF_EVENT_IOC_ID)
		if err != nil {
			return nil, fmt.Errorf("perf %s on CPU %d: PERF_EVENT_IOC_ID: %w", e.name, cpu, err)
		}
		g.ids = append(g.ids, id)
	}
	if err := unix.IoctlSetInt(g.fds[0], unix.PERF_EVENT_IOC_ENABLE, unix.PERF_IOC_FLAG_GROUP); err != nil {
		return nil, fmt.Errorf("perf group %s on CPU %d: enable: %w", spec.name, cpu, err)
	}
	return g, nil
}

// perfOpenError says what a perf_event_open errno means for this collector.
func perfOpenError(event string, cpu int, err error) error {
	var why string
	switch {
	case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
		why = "permission denied: CPU-wide perf events need CAP_PERFMON (Linux 5.8+) or CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= 0"
	case errors.Is(err, unix.ENOENT), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, unix.EINVAL):
		why = "event not supported by this CPU/kernel (no hardware PMU?)"
	case errors.Is(err, unix.ENODEV):
		why = "CPU offline or does not exist"
	default:
		why = "perf_event_open failed"
	}
	return fmt.Errorf("perf %s on CPU %d: %s: %w", event, cpu, why, err)
}

func isPerfUnsupported(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL)
}

func (g *perfGroup) close() error {
	var errs []error
	for _, fd := range g.fds {
		if err := unix.Close(fd); err != nil {
			errs = append(errs, err)
		}
	}
	g.fds = nil
	return errors.Join(errs...)
}

// read reads and decodes the group, mapping each value to its event by id.
func (g *perfGroup) read() (perfGroupRead, error) {
	n, err := unix.Read(g.fds[0], g.buf)
	if err != nil {
		return perfGroupRead{}, fmt.Errorf("perf group %s on CPU %s: read: %w", g.spec.name, g.cpu, err)
	}
	r, err := decodePerfGroupRead(g.buf[:n], perfReadFormat)
	if err != nil {
		return r, fmt.Errorf("perf group %s on CPU %s: %w", g.spec.name, g.cpu, err)
	}
	if len(r.Values) != len(g.ids) {
		return r, fmt.Errorf("perf group %s on CPU %s: %d values, opened %d events", g.spec.name, g.cpu, len(r.Values), len(g.ids))
	}
	ordered := make([]perfValue, len(g.ids))
	for _, v := range r.Values {
		k := slices.Index(g.ids, v.ID)
		if k < 0 {
			return r, fmt.Errorf("perf group %s on CPU %s: unknown event id %d", g.spec.name, g.cpu, v.ID)
		}
		ordered[k] = v
	}
	r.Values = ordered
	return r, nil
}

// Update reads every group; a group that fails to read is reported in the
// error and the others still emit.
func (c *perfCollector) Update(_ context.Context, ch chan<- prometheus.Metric) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.groups == nil {
		return errors.New("perf: collector closed")
	}
	var errs []error
	for _, g := range c.groups {
		r, err := g.read()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		scaled, err := g.scaler.add(r)
		if err != nil {
			errs = append(errs, fmt.Errorf("perf group %s on CPU %s: %w", g.spec.name, g.cpu, err))
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
		if err := g.close(); err != nil {
			errs = append(errs, err)
		}
	}
	c.groups = nil
	return errors.Join(errs...)
}
