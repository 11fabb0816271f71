package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

var (
	bpfProgInfo = newFamily("bpf", "prog_info",
		"An XDP program attached to a device: mode and program id from rtnetlink (RTM_GETLINK IFLA_XDP_DRV/SKB/HW_PROG_ID), "+
			"name and tag from BPF_OBJ_GET_INFO_BY_FD, link_id of the bpf_link holding it (empty when attached without a link). Always 1.",
		Gauge, "device", "mode", "prog_id", "name", "tag", "link_id")
	bpfProgRuns = newFamily("bpf", "prog_runs_total",
		"Times the XDP program ran (bpf_prog_info.run_cnt), over every device it is attached to. "+
			"The kernel counts only while BPF stats are enabled: see xdp_bpf_stats_enabled.",
		Counter, "prog_id", "name")
	bpfProgRunSeconds = newFamily("bpf", "prog_run_seconds_total",
		"Time the XDP program spent running (bpf_prog_info.run_time_ns), over every device it is attached to. "+
			"The kernel counts only while BPF stats are enabled: see xdp_bpf_stats_enabled.",
		Counter, "prog_id", "name")
	bpfStatsEnabled = newFamily("bpf", "stats_enabled",
		"1 when the kernel collects BPF run counts and run time because of this source: "+
			`source="sysctl" is kernel.bpf_stats_enabled, source="exporter" is a BPF_ENABLE_STATS fd held by this exporter `+
			"(--collector.bpf.enable-stats). Another process holding such an fd is not visible here.",
		Gauge, "source")
)

func init() {
	register(Registration{
		Name:           "bpf",
		Help:           "XDP programs attached to each device, with their run count and run time",
		DefaultEnabled: true,
		// Listing programs by id on every scrape checks CAP_SYS_ADMIN.
		ScrapeCapabilities: []int{unix.CAP_SYS_ADMIN},
		Requires: "CAP_SYS_ADMIN (BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, BPF_LINK_GET_FD_BY_ID, BPF_ENABLE_STATS); " +
			"Linux 5.8 for run count and run time.",
		DeviceLabel: true,
		Flags: func(f *FlagSet) Builder {
			enableStats := f.Flag("enable-stats",
				"Hold a BPF_ENABLE_STATS fd so the kernel counts run count and run time of every BPF program "+
					"(about 20 ns per program run: two clock reads); see docs/collectors/bpf.md.").Bool()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return NewBPFCollector(BPFConfig{EnableStats: *enableStats, ProcFS: shared.ProcFS, Filter: shared.Filter}, logger)
			}
		},
	})
}

// BPFConfig configures the bpf collector.
type BPFConfig struct {
	// EnableStats holds a BPF_ENABLE_STATS fd for the collector's lifetime.
	EnableStats bool
	// ProcFS is the procfs mount point; /proc when empty.
	ProcFS string
	// Filter's devices are those whose programs are reported.
	Filter
}

// bpfCollector reports every XDP program attached to a device of the
// exporter's network namespace. It finds them through rtnetlink and reads
// them by id; it never attaches anything.
type bpfCollector struct {
	cfg    BPFConfig
	logger *slog.Logger
	stats  io.Closer // the BPF_ENABLE_STATS fd, nil when not held

	mu   sync.Mutex
	meta map[ebpf.ProgramID]progMeta // name and tag never change for an id
}

type progMeta struct{ name, tag string }

// NewBPFCollector checks that BPF programs can be listed and, when asked,
// enables BPF run-time statistics until Close.
func NewBPFCollector(cfg BPFConfig, logger *slog.Logger) (Collector, error) {
	return asCollector(newBPFCollector(cfg, logger))
}

func newBPFCollector(cfg BPFConfig, logger *slog.Logger) (*bpfCollector, error) {
	cfg.ProcFS = procRoot(cfg.ProcFS)
	if _, err := ebpf.ProgramGetNextID(0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, denied("listing BPF programs (BPF_PROG_GET_NEXT_ID)", err)
	}
	c := &bpfCollector{cfg: cfg, logger: logger, meta: map[ebpf.ProgramID]progMeta{}}
	if cfg.EnableStats {
		fd, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
		if err != nil {
			return nil, denied("enabling BPF run-time statistics (BPF_ENABLE_STATS)", err)
		}
		c.stats = fd
	}
	return c, nil
}

// denied explains a command of this collector the kernel refused: each
// checks CAP_SYS_ADMIN, and CAP_BPF is not enough.
func denied(what string, err error) error {
	return fmt.Errorf("%s: %w", what, bpfDenied("bpf", needsAdmin, err))
}

// Close releases the BPF_ENABLE_STATS fd; the kernel stops counting when no
// holder and no sysctl keeps statistics on.
func (c *bpfCollector) Close() error {
	if c.stats == nil {
		return nil
	}
	err := c.stats.Close()
	c.stats = nil
	return err
}

// Update reports the statistics switches, then every attached program.
func (c *bpfCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	var errs []error
	if on, err := c.sysctlStats(); err != nil {
		errs = append(errs, err)
	} else {
		c.cfg.Families.send(ch, bpfStatsEnabled, boolValue(on), "sysctl")
	}
	c.cfg.Families.send(ch, bpfStatsEnabled, boolValue(c.stats != nil), "exporter")

	devs, err := snap.Get()
	if err != nil {
		errs = append(errs, err)
	}
	if devs == nil {
		return errors.Join(errs...)
	}
	var atts []xdpAttachment
	for _, d := range devs.All() {
		if c.cfg.Devices.selects(d.Label) {
			atts = append(atts, d.XDP...)
		}
	}
	if len(atts) == 0 {
		return errors.Join(errs...)
	}
	links, err := xdpLinks()
	if err != nil {
		errs = append(errs, err)
	}
	errs = append(errs, c.emit(ctx, ch, atts, links))
	return errors.Join(errs...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (c *bpfCollector) sysctlStats() (bool, error) {
	path := filepath.Join(c.cfg.ProcFS, "sys/kernel/bpf_stats_enabled")
	b, err := os.ReadFile(path)
	if err != nil {
		return false, fmt.Errorf("reading kernel.bpf_stats_enabled: %w", err)
	}
	v, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return false, fmt.Errorf("parsing %s: %w", path, err)
	}
	return v != 0, nil
}

// emit reads each attached program once, however many devices and modes it
// is attached to, and closes its fd before moving on. A program that went
// away since the listing is skipped: it is no longer attached.
func (c *bpfCollector) emit(ctx context.Context, ch chan<- prometheus.Metric, atts []xdpAttachment, links map[linkKey][]link.ID) error {
	var errs []error
	read := map[ebpf.ProgramID]*progMeta{}
	for _, a := range atts {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		m, done := read[a.progID]
		if !done {
			var err error
			m, err = c.readProgram(ch, a.progID)
			if err != nil {
				errs = append(errs, fmt.Errorf("XDP program %d on %s: %w", a.progID, a.device, err))
			}
			read[a.progID] = m
		}
		if m == nil {
			continue
		}
		linkID := ""
		if ids := links[linkKey{ifindex: a.ifindex, prog: a.progID}]; len(ids) == 1 {
			linkID = strconv.FormatUint(uint64(ids[0]), 10)
		}
		c.cfg.Families.send(ch, bpfProgInfo, 1, a.device, a.mode, progIDLabel(a.progID), m.name, m.tag, linkID)
	}
	c.mu.Lock()
	for id := range c.meta {
		if _, ok := read[id]; !ok {
			delete(c.meta, id)
		}
	}
	c.mu.Unlock()
	return errors.Join(errs...)
}

func progIDLabel(id ebpf.ProgramID) string { return strconv.FormatUint(uint64(id), 10) }

// readProgram emits the program's counters and returns its name and tag, or
// nil without error when the program no longer exists.
func (c *bpfCollector) readProgram(ch chan<- prometheus.Metric, id ebpf.ProgramID) (*progMeta, error) {
	prog, err := ebpf.NewProgramFromID(id)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, denied("opening by id (BPF_PROG_GET_FD_BY_ID)", err)
	}
	defer prog.Close()

	c.mu.Lock()
	m, ok := c.meta[id]
	c.mu.Unlock()
	if !ok {
		info, err := prog.Info()
		if err != nil {
			return nil, fmt.Errorf("reading program info: %w", err)
		}
		m = progMeta{name: info.Name, tag: info.Tag}
		c.mu.Lock()
		c.meta[id] = m
		c.mu.Unlock()
	}
	stats, err := prog.Stats()
	if err != nil {
		return &m, fmt.Errorf("reading run count and run time: %w", err)
	}
	label := progIDLabel(id)
	c.cfg.Families.send(ch, bpfProgRuns, float64(stats.RunCount), label, m.name)
	c.cfg.Families.send(ch, bpfProgRunSeconds, stats.Runtime.Seconds(), label, m.name)
	return &m, nil
}

// xdpAttachment is one program in one XDP mode of one device.
type xdpAttachment struct {
	ifindex int
	device  string
	mode    string // native, generic or offload
	progID  ebpf.ProgramID
}

// linkKey identifies an XDP bpf_link by what its link info carries: the
// kernel reports the ifindex but not the mode, so a program held by two
// links on one device (two modes) gets no link_id rather than a wrong one.
type linkKey struct {
	ifindex int
	prog    ebpf.ProgramID
}

// xdpLinks lists the XDP bpf_links of the system. Each link fd is closed by
// the iterator as it moves on.
func xdpLinks() (map[linkKey][]link.ID, error) {
	out := map[linkKey][]link.ID{}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return out, fmt.Errorf("reading bpf_link %d: %w", it.ID, err)
		}
		x := info.XDP()
		if info.Type != link.XDPType || x == nil {
			continue
		}
		k := linkKey{ifindex: int(x.Ifindex), prog: info.Program}
		out[k] = append(out[k], info.ID)
	}
	if err := it.Err(); err != nil {
		return out, denied("listing bpf_links (BPF_LINK_GET_NEXT_ID)", err)
	}
	return out, nil
}
