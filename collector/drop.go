package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/cilium/ebpf/btf"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/drop"
	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/bpf/tracing"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/created"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
)

func init() {
	register(Registration{
		Name: "drop",
		Help: "Packets the kernel's stack dropped (skb:kfree_skb), by device and drop reason, as dropwatch and pwru show them one by one",
		Requires: "Linux 5.17+ (skb:kfree_skb with an enum skb_drop_reason) with BTF (CONFIG_DEBUG_INFO_BTF); CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). " +
			"Runs a program per dropped skb; frames XDP drops are not skbs and cost nothing.",
		DeviceLabel: true,
		// Its maps are read through bpf(2), which needs CAP_BPF before
		// Linux 5.19 where unprivileged BPF is disabled.
		ScrapeCapabilities: []int{unix.CAP_BPF},
		Flags: func(f *FlagSet) Builder {
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return NewDropCollector(DropConfig{Filter: shared.Filter}, logger)
			}
		},
	})
}

var (
	skbDrops = newFamily("drop", "drop_packets_total",
		"Packets (skbs) the kernel freed as dropped, by device and drop reason, from skb:kfree_skb.",
		Counter, "device", "reason").documented("Packets (skbs) the kernel freed as dropped (skb:kfree_skb), by the device the skb was on (empty when it had none) and the kernel's drop reason (enum skb_drop_reason without its SKB_DROP_REASON_ prefix, a subsystem's own name, or the number where the kernel's BTF names none).")
	skbDropUntracked = newFamily("drop", "drop_untracked_total",
		"Dropped skbs not counted per device and reason because the collector's table was full.",
		Counter).documented("Dropped skbs not counted in xdp_drop_packets_total because every slot probed for their device and reason was taken (the table holds 2048 pairs; see docs/collectors/drop.md).")
)

// DropConfig configures the drop collector.
type DropConfig struct {
	// Filter's devices are those whose drops are reported; drops of skbs
	// without a device (no device label) are reported unless
	// device-include is set.
	Filter
}

type dropCollector struct {
	*drop.Objects
	// seen dates the device x reason series, which appear at run time.
	seen    created.Tracker
	cfg     DropConfig
	netns   uint64 // the exporter's own network namespace inode
	reasons *drop.Reasons
}

func NewDropCollector(cfg DropConfig, logger *slog.Logger) (Collector, error) {
	kernel, err := tracing.KernelBTF()
	if err != nil {
		return nil, err
	}
	reasons, err := drop.NewReasons(kernel, btf.LoadKernelModuleSpec)
	if err != nil {
		return nil, err
	}
	netns, err := rtnl.OwnNetns()
	if err != nil {
		return nil, err
	}
	objs, err := drop.New(logger)
	if err != nil {
		return nil, bpfDenied("drop", needsBPF, err)
	}
	return &dropCollector{Objects: objs, cfg: cfg, netns: netns, reasons: reasons}, nil
}

func (c *dropCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	links, err := snap.Get()
	if links == nil {
		return err
	}
	errs := []error{err}
	drops, err := c.Read(func(d reap.Device) reap.Fate { return deviceFate(links, c.netns, d) })
	if err != nil {
		errs = append(errs, fmt.Errorf("reading the drop counters: %w", err))
	}
	// Two keys can share labels: a device of another namespace that was
	// deleted and made again under its name has a new ifindex, and the
	// old key stays until it has been idle for reap.DefaultIdle.
	type series struct{ device, reason string }
	totals := map[series]uint64{}
	for _, d := range drops {
		device, err := c.device(links, d)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if c.cfg.Devices.selects(device) {
			totals[series{device, c.reasons.Name(d.Reason)}] += d.Count
		}
	}
	for s, n := range totals {
		c.cfg.Families.sendCreated(ch, skbDrops, &c.seen, float64(n), s.device, s.reason)
	}
	c.seen.Sweep()
	untracked, err := c.Untracked()
	if err == nil {
		c.cfg.Families.send(ch, skbDropUntracked, float64(untracked))
	}
	return errors.Join(append(errs, err)...)
}

// device is the device label of a count: empty without a device, the
// current name in the exporter's namespace, and the name recorded when
// the slot was claimed in another.
func (c *dropCollector) device(links *Links, d drop.Drops) (string, error) {
	switch {
	case !d.HasDevice:
		return "", nil
	case uint64(d.Device.Netns) == c.netns:
		return links.Label(d.Device.Ifindex), nil
	}
	name, err := c.RecordedName(d)
	if err != nil {
		return "", err
	}
	return foreignLabel(uint64(d.Device.Netns), deviceLabel(name)), nil
}
