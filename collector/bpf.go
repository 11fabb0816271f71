package collector

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/bpfprog"
)

var (
	bpfProgInfo = newFamily("bpf", "bpf_prog_info",
		"An XDP program attached to a device: mode and program id from rtnetlink (RTM_GETLINK IFLA_XDP_DRV/SKB/HW_PROG_ID), "+
			"name and tag from BPF_OBJ_GET_INFO_BY_FD, link_id of the bpf_link holding it (empty when attached without a link). Always 1.",
		Gauge, "device", "mode", "prog_id", "name", "tag", "link_id")
	bpfProgRuns = newFamily("bpf", "bpf_prog_runs_total",
		"Times the XDP program ran (bpf_prog_info.run_cnt), over every device it is attached to. "+
			"The kernel counts only while BPF stats are enabled: see xdp_bpf_stats_enabled.",
		Counter, "prog_id", "name")
	bpfProgRunSeconds = newFamily("bpf", "bpf_prog_run_seconds_total",
		"Time the XDP program spent running (bpf_prog_info.run_time_ns), over every device it is attached to. "+
			"The kernel counts only while BPF stats are enabled: see xdp_bpf_stats_enabled.",
		Counter, "prog_id", "name")
	bpfStatsEnabled = newFamily("bpf", "bpf_stats_enabled",
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
				return asCollector(newBPFCollector(BPFConfig{EnableStats: *enableStats, ProcFS: shared.ProcFS, Filter: shared.Filter}, logger))
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
// them by id (bpfprog); it never attaches anything.
type bpfCollector struct {
	cfg    BPFConfig
	logger *slog.Logger
	stats  io.Closer // the BPF_ENABLE_STATS fd, nil when not held
	progs  *bpfprog.Reader
}

// newBPFCollector checks that BPF programs can be listed and, when asked,
// enables BPF run-time statistics until Close.
func newBPFCollector(cfg BPFConfig, logger *slog.Logger) (*bpfCollector, error) {
	cfg.ProcFS = procRoot(cfg.ProcFS)
	if err := bpfprog.CheckList(); err != nil {
		return nil, bpfDenied("bpf", needsAdmin, err)
	}
	c := &bpfCollector{cfg: cfg, logger: logger, progs: bpfprog.NewReader()}
	if cfg.EnableStats {
		fd, err := bpfprog.EnableStats()
		if err != nil {
			return nil, bpfDenied("bpf", needsAdmin, err)
		}
		c.stats = fd
	}
	return c, nil
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
	if on, err := bpfprog.StatsEnabled(c.cfg.ProcFS); err != nil {
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
	links, err := bpfprog.XDPLinks()
	if err != nil {
		errs = append(errs, bpfDenied("bpf", needsAdmin, err))
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

// emit reads each attached program once, however many devices and modes it
// is attached to. A program that went away since the listing is skipped:
// it is no longer attached.
func (c *bpfCollector) emit(ctx context.Context, ch chan<- prometheus.Metric, atts []xdpAttachment, links map[bpfprog.LinkKey][]link.ID) error {
	var errs []error
	read := map[ebpf.ProgramID]*bpfprog.Program{}
	for _, a := range atts {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		p, done := read[a.progID]
		if !done {
			var err error
			if p, err = c.progs.Read(a.progID); err != nil {
				errs = append(errs, fmt.Errorf("XDP program %d on %s: %w", a.progID, a.device, bpfDenied("bpf", needsAdmin, err)))
			}
			if err == nil && p != nil {
				label := progIDLabel(a.progID)
				c.cfg.Families.send(ch, bpfProgRuns, float64(p.RunCount), label, p.Name)
				c.cfg.Families.send(ch, bpfProgRunSeconds, p.Runtime.Seconds(), label, p.Name)
			}
			read[a.progID] = p
		}
		if p == nil {
			continue
		}
		linkID := ""
		if ids := links[bpfprog.LinkKey{Ifindex: a.ifindex, Prog: a.progID}]; len(ids) == 1 {
			linkID = strconv.FormatUint(uint64(ids[0]), 10)
		}
		c.cfg.Families.send(ch, bpfProgInfo, 1, a.device, a.mode, progIDLabel(a.progID), p.Name, p.Tag, linkID)
	}
	c.progs.Keep(func(id ebpf.ProgramID) bool { _, ok := read[id]; return ok })
	return errors.Join(errs...)
}

func progIDLabel(id ebpf.ProgramID) string { return strconv.FormatUint(uint64(id), 10) }

// xdpAttachment is one program in one XDP mode of one device.
type xdpAttachment struct {
	ifindex int
	device  string
	mode    string // native, generic or offload
	progID  ebpf.ProgramID
}
