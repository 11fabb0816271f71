package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"

	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	bpfrxq "github.com/xdp-exporter/xdp_exporter/bpf/rxq"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/created"
)

var (
	rxqPackets = newFamily("rxq", "rxq_packets_total",
		"Packets an XDP program returned by RX queue, CPU and verdict, as xdp_rxq_info counts them.",
		Counter, "device", "queue", "cpu", "action").documented("Packets an XDP program returned, by RX queue (rx_queue_index), the CPU that ran it and its verdict (action): " +
		"the per-RXQ:CPU counts of samples/bpf xdp_rxq_info. Attach mode counts in the exporter's own program, " +
		"whose verdict is --collector.rxq.action; observe mode (--collector.rxq.observe) counts the verdicts of the " +
		"programs already attached, through an fexit program on each (action aborted, drop, pass, tx, redirect, " +
		"or unknown for any other return value). A queue/CPU/verdict cell appears at its first packet.")
	rxqBytes = newFamily("rxq", "rxq_bytes_total",
		"Bytes of the packets of xdp_rxq_packets_total by RX queue, CPU and verdict.",
		Counter, "device", "queue", "cpu", "action").documented("Bytes (data_end - data, without FCS) of the packets of xdp_rxq_packets_total, by RX queue, CPU and verdict; " +
		"observe mode reads them when the program returns, after any head or tail adjustment it made.")
	rxqIssues = newFamily("rxq", "rxq_issues_total",
		"Packets the rxq program could not count per queue, by reason, as samples/bpf xdp_rxq_info's issue-pps.",
		Counter, "device", "reason").documented("Packets that could not be counted per queue, the issue-pps of samples/bpf xdp_rxq_info: " +
		`reason="queue_out_of_range" (rx_queue_index beyond the device's RX queue count when counting began) or, ` +
		`with --collector.rxq.check-ifindex, "ifindex_mismatch" (ctx->ingress_ifindex is not the device).`)
	rxqInfo = newFamily("rxq", "rxq_info",
		"The rxq collector's own XDP program on a device: its verdict, mode, data reads and program id; always 1.",
		Gauge, "device", "action", "attach_mode", "read", "prog_id").documented("The rxq XDP program attached to a device (attach mode): its verdict, attach mode, whether it reads packet data, and its BPF program id.")
	rxqObserved = newFamily("rxq", "rxq_observed_info",
		"An XDP program the rxq collector's observe mode counts through fexit; always 1.",
		Gauge, "device", "attach_mode", "prog_id").documented("An XDP program observe mode counts (--collector.rxq.observe): the device, attach mode and id of the program " +
		"an fexit program watches. Its counts go on in xdp_rxq_packets_total across a replacement; this series names the program now counted.")
	rxqComponentPackets = newFamily("rxq", "rxq_component_packets_total",
		"Packets each program in libxdp's dispatcher returned by RX queue, CPU and verdict, counted by fexit.",
		Counter, "device", "queue", "cpu", "action", "prog_id", "name").documented("Observe mode, where libxdp's dispatcher runs several programs on a device: packets each component program returned, " +
		"by RX queue, CPU and verdict, counted by an fexit program on the component (prog_id, name). A verdict in the component's " +
		"chain-call actions (xdp_bpf_dispatcher_component_info) passes the packet on to the next component; any other is the device's.").experimental()
	rxqComponentBytes = newFamily("rxq", "rxq_component_bytes_total",
		"Bytes of the packets of xdp_rxq_component_packets_total, read when the component returns.",
		Counter, "device", "queue", "cpu", "action", "prog_id", "name").experimental()
	rxqUnobservable = newFamily("rxq", "rxq_unobservable_info",
		"An XDP program observe mode cannot count, with the kernel's reason; always 1.",
		Gauge, "device", "attach_mode", "prog_id", "reason").documented("An XDP program observe mode cannot count, with the reason: no_btf (loaded without BTF), offloaded (runs on the NIC), " +
		"not_permitted (the kernel refused the fexit program: lockdown, a security module, or a kernel that refuses tracing programs), " +
		"not_supported (no BPF trampoline), busy (EBUSY: no trampoline on this program, e.g. libxdp's dispatcher of one component, whose entry function the component replaces), " +
		"refused (EINVAL: a target that is not JITed), error. Logged once at INFO; not a failure.")
)

// rxqActions maps --collector.rxq.action values to XDP verdicts.
var rxqActions = map[string]bpfrxq.XDPAction{
	"pass":     bpfrxq.XDPPass,
	"drop":     bpfrxq.XDPDrop,
	"tx":       bpfrxq.XDPTx,
	"redirect": bpfrxq.XDPRedirect,
}

// rxqModes maps --collector.rxq.mode values to attach flags.
var rxqModes = map[string]link.XDPAttachFlags{
	"native":  link.XDPDriverMode,
	"generic": link.XDPGenericMode,
}

// maxRxqQueues caps the per-queue map, whose size is otherwise the
// device's RX queue count (num_rx_queues), in case a driver allocates a
// huge number of queues it never uses.
const maxRxqQueues = 1024

func init() {
	register(Registration{
		Name: "rxq",
		Help: "Per RX queue, CPU and verdict packet counts (samples/bpf xdp_rxq_info): from an XDP program the exporter attaches to the given devices, " +
			"or with --collector.rxq.observe from the XDP programs already attached",
		Requires: "Attach mode: Linux 5.9+ (XDP bpf_link), CAP_BPF, CAP_PERFMON (the byte count subtracts packet pointers) and CAP_NET_ADMIN; a device free of other XDP programs " +
			"(or --collector.rxq.force); native mode needs driver XDP support. Observe mode: BPF trampolines (fexit on XDP programs, x86-64 since 5.5, arm64 since 6.0), " +
			"kernel BTF, programs loaded with BTF, CAP_BPF, CAP_PERFMON and CAP_SYS_ADMIN while scraping (it opens programs by id)",
		// Observe mode opens the attached programs by id and loads its
		// fexit programs at scrape time, as programs come and go.
		ScrapeCapabilities: []int{unix.CAP_BPF, unix.CAP_PERFMON, unix.CAP_SYS_ADMIN},
		Flags: func(f *FlagSet) Builder {
			observe := f.Flag("observe", "Count the XDP programs already attached (native and generic; every device, or the --collector.rxq.device list) "+
				"through an fexit program on each, instead of attaching one; never attaches, replaces or alters an XDP program. "+
				"Costs a trampoline call per packet: docs/collectors/rxq.md.").Bool()
			devices := f.Flag("device", "Device to attach the rxq XDP program to (repeatable; required in attach mode), or to observe (observe mode; default: every device).").Strings()
			action := f.Flag("action", "XDP verdict: pass (monitor mode), drop, tx (MAC swap, back out of the device) or redirect.").
				Default("pass").Enum("pass", "drop", "tx", "redirect")
			redirect := f.Flag("redirect-device", "Target device of --collector.rxq.action=redirect (through a one-slot devmap).").String()
			read := f.Flag("read", "Read the Ethernet header before the verdict (xdp_rxq_info --read), to measure the cost of touching packet data.").Bool()
			mode := f.Flag("mode", "XDP attach mode: native (driver) or generic (skb).").Default("native").Enum("native", "generic")
			force := f.Flag("force", "Replace an XDP program already attached to a device. Without it the collector refuses such a device.").Bool()
			checkIfindex := f.Flag("check-ifindex", "Count packets whose ctx->ingress_ifindex is not the device as issues "+
				`(reason="ifindex_mismatch"), for parity with xdp_rxq_info; costs three dependent loads per packet, and cannot fire `+
				"when the program is attached to one device as here.").Bool()
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				if *observe {
					if given := f.Given("action", "redirect-device", "read", "mode", "force", "check-ifindex"); len(given) > 0 {
						return nil, fmt.Errorf("rxq: %s only apply when the exporter attaches its own program, not with --collector.rxq.observe", strings.Join(given, ", "))
					}
				}
				return NewRxqCollector(RxqConfig{
					Observe: *observe,
					Devices: *devices, Action: *action, RedirectDevice: *redirect,
					Read: *read, Mode: *mode, Force: *force, CheckIfindex: *checkIfindex, Families: shared.Filter.Families,
					SysFS: shared.SysFS,
				}, logger)
			}
		},
	})
}

// RxqConfig configures the rxq collector.
type RxqConfig struct {
	// Observe counts the XDP programs already attached instead of
	// attaching one; Action, RedirectDevice, Read, Mode, Force and
	// CheckIfindex are then unused.
	Observe bool
	// Devices to attach to, or to observe (every device when empty).
	Devices        []string
	Action         string // pass, drop, tx or redirect; pass when empty
	RedirectDevice string // the devmap target of the redirect action
	Read           bool
	Mode           string // native or generic; native when empty
	Force          bool
	// CheckIfindex enables xdp_rxq_info's ifindex issue count.
	CheckIfindex bool
	// Queues sizes the per-queue counters; 0 means the device's RX queue
	// count. Packets from higher queues are counted as issues.
	Queues int
	// Families drops the families it does not keep.
	Families familyFilter
	// SysFS is the sysfs mount point, /sys when empty: observe mode
	// reads libxdp's pins under its fs/bpf on kernels before 5.13.
	SysFS string
}

type rxqDevice struct {
	name string
	*bpfrxq.Attached
}

type rxqCollector struct {
	cfg     RxqConfig
	devices []*rxqDevice
	// seen dates the queue x CPU cells, which appear at their first packet.
	seen created.Tracker
}

// NewRxqCollector loads one rxq program per device and attaches it through
// a bpf_link, so the kernel detaches it when the exporter dies.
func NewRxqCollector(cfg RxqConfig, logger *slog.Logger) (Collector, error) {
	if cfg.Observe {
		return newRxqObserver(cfg, logger)
	}
	if cfg.Action == "" {
		cfg.Action = "pass"
	}
	if cfg.Mode == "" {
		cfg.Mode = "native"
	}
	action, ok := rxqActions[cfg.Action]
	if !ok {
		return nil, fmt.Errorf("rxq: unknown action %q (want pass, drop, tx or redirect)", cfg.Action)
	}
	flags, ok := rxqModes[cfg.Mode]
	if !ok {
		return nil, fmt.Errorf("rxq: unknown mode %q (want native or generic)", cfg.Mode)
	}
	if len(cfg.Devices) == 0 {
		return nil, errors.New("rxq: no device given: name each device to attach to with --collector.rxq.device")
	}
	if action == bpfrxq.XDPRedirect && cfg.RedirectDevice == "" {
		return nil, errors.New("rxq: --collector.rxq.action=redirect needs --collector.rxq.redirect-device")
	}
	if action != bpfrxq.XDPRedirect && cfg.RedirectDevice != "" {
		return nil, fmt.Errorf("rxq: --collector.rxq.redirect-device=%s is only used with --collector.rxq.action=redirect", cfg.RedirectDevice)
	}
	seen := map[string]bool{}
	for _, d := range cfg.Devices {
		if seen[d] {
			return nil, fmt.Errorf("rxq: device %s given twice", d)
		}
		seen[d] = true
	}
	links, err := dumpLinks()
	if err != nil {
		return nil, fmt.Errorf("rxq: %w", err)
	}
	var target *Link
	if action == bpfrxq.XDPRedirect {
		t, ok := links.ByName(cfg.RedirectDevice)
		if !ok {
			return nil, fmt.Errorf("rxq: redirect device %s: %w", cfg.RedirectDevice, errNoDevice)
		}
		target = &t
	}

	c := &rxqCollector{cfg: cfg}
	for _, name := range cfg.Devices {
		dev, ok := links.ByName(name)
		if !ok {
			return nil, errors.Join(fmt.Errorf("rxq: device %s: %w", name, errNoDevice), c.Close())
		}
		d, err := attachRxq(dev, cfg, action, flags, target, logger)
		if err != nil {
			return nil, errors.Join(err, c.Close())
		}
		c.devices = append(c.devices, d)
	}
	return c, nil
}

// errNoDevice is what attaching to a device the namespace lacks says.
var errNoDevice = errors.New("no such interface in the exporter's network namespace")

func attachRxq(dev Link, cfg RxqConfig, action bpfrxq.XDPAction, flags link.XDPAttachFlags, target *Link, logger *slog.Logger) (*rxqDevice, error) {
	name := dev.Name
	if len(dev.XDP) > 0 {
		x := dev.XDP[0]
		mode := x.mode + " mode"
		if len(dev.XDP) > 1 {
			mode = "several modes"
		}
		if !cfg.Force {
			return nil, fmt.Errorf("rxq: device %s already has XDP program id %d attached (%s); "+
				"refusing to replace it without --collector.rxq.force", name, x.progID, mode)
		}
		if err := bpfrxq.DetachAll(dev.Index); err != nil {
			return nil, fmt.Errorf("rxq: replacing XDP program id %d on %s: %w", x.progID, name, err)
		}
		logger.Warn("detached the XDP program already on the device (--collector.rxq.force)",
			"device", name, "prog_id", x.progID)
	}
	queues := cfg.Queues
	if queues <= 0 {
		queues = min(max(int(dev.RxQueues), 1), maxRxqQueues)
	}
	redirectTo := 0
	if target != nil {
		redirectTo = int(target.Index)
	}
	a, err := bpfrxq.Attach(bpfrxq.Config{
		Action: action, Read: cfg.Read, CheckIfindex: cfg.CheckIfindex, Ifindex: int(dev.Index), Queues: queues,
	}, flags, redirectTo)
	if err != nil {
		return nil, fmt.Errorf("rxq: device %s (%s mode): %w", name, cfg.Mode, bpfDenied("rxq", needsBPF, err))
	}
	return &rxqDevice{name: name, Attached: a}, nil
}

func (c *rxqCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	var errs []error
	for _, d := range c.devices {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.updateDevice(d, ch); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", d.name, err))
		}
	}
	c.seen.Sweep()
	return errors.Join(errs...)
}

func (c *rxqCollector) updateDevice(d *rxqDevice, ch chan<- prometheus.Metric) error {
	c.cfg.Families.send(ch, rxqInfo, 1, d.name, c.cfg.Action, c.cfg.Mode, strconv.FormatBool(c.cfg.Read), progIDLabel(d.ProgID()))
	counts := d.Read()
	for q, perCPU := range counts.Queue {
		queue := strconv.Itoa(q)
		for cpu, r := range perCPU {
			// Only the queue/CPU pairs that ever saw a packet: with IRQ
			// affinity set, that is one CPU per queue, not queues x CPUs.
			if r.Packets == 0 {
				continue
			}
			c.cfg.Families.sendCreated(ch, rxqPackets, &c.seen, float64(r.Packets), d.name, queue, strconv.Itoa(cpu), c.cfg.Action)
			c.cfg.Families.sendCreated(ch, rxqBytes, &c.seen, float64(r.Bytes), d.name, queue, strconv.Itoa(cpu), c.cfg.Action)
		}
	}
	issues := func(reason string, perCPU []bpfrxq.RxqRxqRec) {
		var sum uint64
		for _, r := range perCPU {
			sum += r.Packets
		}
		c.cfg.Families.send(ch, rxqIssues, float64(sum), d.name, reason)
	}
	issues("queue_out_of_range", counts.QueueOutOfRange)
	if c.cfg.CheckIfindex {
		issues("ifindex_mismatch", counts.IfindexMismatch)
	}
	// The counters of a program whose link was detached are still sent,
	// as they stand; the error makes the scrape say they have stopped
	// moving, rather than count nothing in silence.
	return d.Check()
}

// Close detaches the programs and frees their maps.
func (c *rxqCollector) Close() error {
	var errs []error
	for _, d := range c.devices {
		errs = append(errs, d.Close())
	}
	c.devices = nil
	return errors.Join(errs...)
}
