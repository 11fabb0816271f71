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
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/tcprog"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xdpdispatch"
)

var (
	bpfProgInfo = newFamily("bpf", "bpf_prog_info",
		"An XDP program attached to a device, from RTM_GETLINK and BPF_OBJ_GET_INFO_BY_FD; always 1.",
		Gauge, "device", "attach_mode", "prog_id", "name", "tag", "link_id").documented("An XDP program attached to a device: attach mode and program id from rtnetlink (RTM_GETLINK IFLA_XDP_DRV/SKB/HW_PROG_ID), " +
		"name and tag from BPF_OBJ_GET_INFO_BY_FD, link_id of the bpf_link holding it (empty when attached without a link). Always 1.")
	bpfProgRuns = newFamily("bpf", "bpf_prog_runs_total",
		"Times the BPF program ran, from bpf_prog_info.run_cnt (counted while BPF stats are on).",
		Counter, "prog_id", "name").documented("Times the program ran (bpf_prog_info.run_cnt), over every device and hook it is attached to: an XDP program, or one on a tc, tcx or netkit hook. " +
		"The kernel counts only while BPF stats are enabled: see xdp_bpf_stats_enabled.")
	bpfProgRunSeconds = newFamily("bpf", "bpf_prog_run_seconds_total",
		"Time the BPF program spent running, from bpf_prog_info.run_time_ns (counted while BPF stats are on).",
		Counter, "prog_id", "name").documented("Time the program spent running (bpf_prog_info.run_time_ns), over every device and hook it is attached to: an XDP program, or one on a tc, tcx or netkit hook. " +
		"The kernel counts only while BPF stats are enabled: see xdp_bpf_stats_enabled.")
	bpfStatsEnabled = newFamily("bpf", "bpf_stats_enabled",
		"1 when the kernel counts BPF run time because of this source (the sysctl, or a BPF_ENABLE_STATS fd held here).",
		Gauge, "source").documented("1 when the kernel collects BPF run counts and run time because of this source: " +
		`source="sysctl" is kernel.bpf_stats_enabled, source="exporter" is a BPF_ENABLE_STATS fd held by this exporter ` +
		"(--collector.bpf.enable-stats). Another process holding such an fd is not visible here.")
)

func init() {
	register(Registration{
		Name:           "bpf",
		Help:           "XDP, tc, tcx and netkit programs attached to each device, with their run count and run time",
		DefaultEnabled: true,
		// Listing programs by id on every scrape checks CAP_SYS_ADMIN;
		// querying the tcx and netkit hooks, CAP_NET_ADMIN.
		ScrapeCapabilities: []int{unix.CAP_SYS_ADMIN, unix.CAP_NET_ADMIN},
		Requires: "CAP_SYS_ADMIN (BPF_PROG_GET_NEXT_ID, BPF_PROG_GET_FD_BY_ID, BPF_LINK_GET_FD_BY_ID, BPF_ENABLE_STATS); " +
			"CAP_NET_ADMIN (BPF_PROG_QUERY of tcx and netkit hooks); Linux 5.8 for run count and run time, 6.6 for tcx, 6.7 for netkit.",
		DeviceLabel: true,
		Flags: func(f *FlagSet) Builder {
			enableStats := f.Flag("enable-stats",
				"Hold a BPF_ENABLE_STATS fd so the kernel counts run count and run time of every BPF program "+
					"(two clock reads per program run; docs/performance.md has the measured cost); see docs/collectors/bpf.md.").Bool()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return asCollector(newBPFCollector(BPFConfig{EnableStats: *enableStats, ProcFS: shared.ProcFS, SysFS: shared.SysFS, Filter: shared.Filter}, logger))
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
	// SysFS is the sysfs mount point, /sys when empty: libxdp's pins are
	// under its fs/bpf.
	SysFS string
	// Filter's devices are those whose programs are reported.
	Filter
}

// bpfCollector reports every XDP program attached to a device of the
// exporter's network namespace, and every program on its tc, tcx and
// netkit hooks. It finds them through rtnetlink and BPF_PROG_QUERY and
// reads them by id (bpfprog); it never attaches anything.
type bpfCollector struct {
	cfg    BPFConfig
	logger *slog.Logger
	stats  io.Closer // the BPF_ENABLE_STATS fd, nil when not held
	progs  *bpfprog.Reader
	kinds  tcKinds
}

// newBPFCollector checks that BPF programs can be listed and, when asked,
// enables BPF run-time statistics until Close.
func newBPFCollector(cfg BPFConfig, logger *slog.Logger) (*bpfCollector, error) {
	cfg.ProcFS, cfg.SysFS = procRoot(cfg.ProcFS), sysRoot(cfg.SysFS)
	if err := bpfprog.CheckList(); err != nil {
		return nil, bpfDenied("bpf", needsAdmin, err)
	}
	c := &bpfCollector{cfg: cfg, logger: logger, progs: bpfprog.NewReader(), kinds: probeTCKinds(logger)}
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
// The traffic-control hooks are read only while their family is kept.
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
	var selected []Link
	for _, d := range devs.All() {
		if c.cfg.Devices.selects(d.Label) {
			atts = append(atts, d.XDP...)
			selected = append(selected, d)
		}
	}
	var tc []tcprog.Attachment
	if c.cfg.Families.keeps(bpfTCProgInfo) {
		tc, err = c.tcAttachments(selected)
		errs = append(errs, err)
	}
	var links map[bpfprog.LinkKey][]link.ID
	if len(atts) > 0 {
		if links, err = bpfprog.XDPLinks(); err != nil {
			errs = append(errs, bpfDenied("bpf", needsAdmin, err))
		}
	}
	errs = append(errs, c.emit(ctx, ch, devs, atts, links, tc))
	return errors.Join(errs...)
}

func boolValue(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// emit reads each attached program once, however many devices, modes
// and hooks it is attached to. A program that went away since the listing
// is skipped: it is no longer attached.
func (c *bpfCollector) emit(ctx context.Context, ch chan<- prometheus.Metric, devs *Links, atts []xdpAttachment,
	links map[bpfprog.LinkKey][]link.ID, tc []tcprog.Attachment) error {
	var errs []error
	read := map[ebpf.ProgramID]*bpfprog.Program{}
	prog := func(id ebpf.ProgramID, where string) *bpfprog.Program {
		p, done := read[id]
		if done {
			return p
		}
		p, err := c.progs.Read(id)
		if err != nil {
			errs = append(errs, fmt.Errorf("program %d on %s: %w", id, where, bpfDenied("bpf", needsAdmin, err)))
		}
		if err == nil && p != nil {
			label := progIDLabel(id)
			c.cfg.Families.send(ch, bpfProgRuns, float64(p.RunCount), label, p.Name)
			c.cfg.Families.send(ch, bpfProgRunSeconds, p.Runtime.Seconds(), label, p.Name)
		}
		read[id] = p
		return p
	}
	for _, a := range atts {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		p := prog(a.progID, "the XDP hook of "+a.device)
		if p == nil {
			continue
		}
		linkID := ""
		if ids := links[bpfprog.LinkKey{Ifindex: a.ifindex, Prog: a.progID}]; len(ids) == 1 {
			linkID = strconv.FormatUint(uint64(ids[0]), 10)
		}
		c.cfg.Families.send(ch, bpfProgInfo, 1, a.device, a.mode, progIDLabel(a.progID), p.Name, p.Tag, linkID)
		if p.Name == xdpdispatch.Name && c.cfg.Families.keeps(bpfDispatcherComponent) {
			errs = append(errs, c.sendComponents(ch, a))
		}
	}
	for _, a := range tc {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if p := prog(a.Prog, "the "+a.Kind+" "+a.Direction+" hook of "+devs.Label(a.Ifindex)); p != nil {
			c.sendTC(ch, devs, a, p.Name, p.Tag)
		}
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
