package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf/btf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/bpf"
)

func init() {
	register(Registration{
		Name: "drop",
		Help: "Packets the kernel's stack dropped (skb:kfree_skb), by device and drop reason, as dropwatch and pwru show them one by one",
		Requires: "Linux 5.17+ (skb:kfree_skb with an enum skb_drop_reason) with BTF (CONFIG_DEBUG_INFO_BTF); CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN). " +
			"Runs a program per dropped skb; frames XDP drops are not skbs and cost nothing.",
		DeviceLabel: true,
		Flags: func(f *FlagSet) Builder {
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return NewDropCollector(DropConfig{Filter: shared.Filter}, logger)
			}
		},
	})
}

var (
	skbDrops = newCollectorFamily("drop", "skb", "drops_total",
		"Packets (skbs) the kernel freed as dropped (skb:kfree_skb), by the device the skb was on (empty when it had none) and the kernel's drop reason (enum skb_drop_reason without its SKB_DROP_REASON_ prefix, a subsystem's own name, or the number where the kernel's BTF names none).",
		Counter, "device", "reason")
	skbDropUntracked = newCollectorFamily("drop", "skb", "drops_untracked_total",
		"Dropped skbs not counted in xdp_skb_drops_total because every slot probed for their device and reason was taken (the table holds 2048 pairs; see docs/collectors/drop.md).",
		Counter)
)

// dropTracepoint is bpf/drop.c's program and the arguments it reads: the
// skb, the location (not read) and the reason. Linux 6.11 added rx_sk
// after them.
var dropTracepoint = tracepointProgram{prog: bpf.DropProgKfreeSkb,
	params: []string{"struct sk_buff *", "*", "enum skb_drop_reason"}}

// dropNoDevice is NO_DEVICE of bpf/drop.c: the namespace word of a drop
// whose skb had no device.
const dropNoDevice = 1

// DropConfig configures the drop collector.
type DropConfig struct {
	// Filter's devices are those whose drops are reported; drops of skbs
	// without a device (device="") are reported unless device-include is
	// set.
	Filter
}

type dropCollector struct {
	*tracepointSet
	// seen dates the device x reason series, which appear at run time.
	seen    firstSeen
	cfg     DropConfig
	netns   uint64 // the exporter's own network namespace inode
	reasons *dropReasons
	reaper  *reaper[slotKey]
}

func NewDropCollector(cfg DropConfig, logger *slog.Logger) (Collector, error) {
	spec, err := bpf.LoadDrop()
	if err != nil {
		return nil, err
	}
	kernel, err := kernelBTF("drop")
	if err != nil {
		return nil, err
	}
	reasons, err := newDropReasons(kernel, btf.LoadKernelModuleSpec)
	if err != nil {
		return nil, err
	}
	netns, err := ownNetns()
	if err != nil {
		return nil, err
	}
	set, err := loadTracepoints("drop", logger, spec, []tracepointProgram{dropTracepoint}, func(string) string { return "skb" })
	if err != nil {
		return nil, err
	}
	return &dropCollector{tracepointSet: set, cfg: cfg, netns: netns, reasons: reasons, reaper: newReaper[slotKey](foreignIdle)}, nil
}

func (c *dropCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	owners, values := c.maps[bpf.DropMapDropsOwners], c.maps[bpf.DropMapDrops]
	slots, err := readSlots[uint64](owners, values)
	if err != nil {
		return fmt.Errorf("reading the drop counters: %w", err)
	}
	links, err := snap.Get()
	if links == nil {
		return err
	}
	errs := []error{err}
	table := slotTable{owners: owners, claims: c.maps[bpf.DropMapDropsClaims], values: values}
	slots, err = reapSlots(c.reaper, table, slots, dropCount, func(k slotKey) fate {
		if k.k0 == dropNoDevice {
			return keyLive
		}
		return deviceFate(links, c.netns, k.k0, uint32(k.k1>>32))
	})
	if err != nil {
		errs = append(errs, fmt.Errorf("freeing the drop slots of devices that are gone: %w", err))
	}
	// Two keys can share labels: a device of another namespace that was
	// deleted and made again under its name has a new ifindex, and the
	// old key stays until it has been idle for foreignIdle.
	type series struct{ device, reason string }
	totals := map[series]uint64{}
	for _, e := range slots {
		device, err := c.device(links, e)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if !c.cfg.Devices.selects(device) {
			continue
		}
		totals[series{device, c.reasons.name(uint32(e.key.k1))}] += dropCount(e)
	}
	for s, n := range totals {
		c.cfg.Families.sendCreated(ch, skbDrops, &c.seen, float64(n), s.device, s.reason)
	}
	c.seen.sweep()
	var untracked []uint64
	if err := c.maps[bpf.DropMapDropUntracked].Lookup(uint32(0), &untracked); err != nil {
		errs = append(errs, fmt.Errorf("reading the untracked drop counter: %w", err))
	} else {
		c.cfg.Families.send(ch, skbDropUntracked, float64(perCPUSum(untracked)))
	}
	return errors.Join(errs...)
}

// device is the device label of a key: empty without a device, the
// current name in the exporter's namespace, and the name recorded when
// the slot was claimed in another.
func (c *dropCollector) device(links *Links, e slotCounts[uint64]) (string, error) {
	ifindex := uint32(e.key.k1 >> 32)
	switch e.key.k0 {
	case dropNoDevice:
		return "", nil
	case c.netns:
		return links.Label(ifindex), nil
	}
	var n bpf.DropDevName
	if err := c.maps[bpf.DropMapDropNames].Lookup(e.index[0], &n); err != nil {
		return "", fmt.Errorf("reading a drop device name: %w", err)
	}
	return foreignLabel(e.key.k0, deviceLabel(recordedName(n.Dev))), nil
}

func dropCount(e slotCounts[uint64]) uint64 {
	var t uint64
	for _, perCPU := range e.slots {
		for _, n := range perCPU {
			t += n
		}
	}
	return t
}

// dropReasons names drop reasons as the running kernel does. The core
// reasons are enum skb_drop_reason of vmlinux. Since Linux 6.6 the upper
// 16 bits of a reason may name a subsystem (enum skb_drop_reason_subsys)
// whose own enum holds the full values (include/net/dropreason.h); it is
// read from vmlinux where the subsystem is built in, else from its
// module's BTF, the first time one of its reasons is seen: only a loaded
// module drops with them.
type dropReasons struct {
	kernel     *btf.Spec
	core       map[uint32]string
	subsystems map[uint32]string // subsystem number -> name (OPENVSWITCH)
	loadModule func(string) (*btf.Spec, error)

	mu      sync.Mutex
	modules map[uint32]map[uint32]string // by subsystem, read once
}

// dropSubsystem is where a subsystem of enum skb_drop_reason_subsys
// defines its reasons: the module and its enum.
type dropSubsystem struct{ module, enum string }

var dropSubsystems = map[string]dropSubsystem{
	"MAC80211_UNUSABLE": {"mac80211", "mac80211_drop_reason"},
	"MAC80211_MONITOR":  {"mac80211", "mac80211_drop_reason"},
	"OPENVSWITCH":       {"openvswitch", "ovs_drop_reason"},
}

func newDropReasons(kernel *btf.Spec, loadModule func(string) (*btf.Spec, error)) (*dropReasons, error) {
	var reasons *btf.Enum
	if err := kernel.TypeByName("skb_drop_reason", &reasons); err != nil {
		if errors.Is(err, btf.ErrNotFound) {
			return nil, Unsupported("the kernel has no enum skb_drop_reason: skb:kfree_skb carries drop reasons since Linux 5.17")
		}
		return nil, fmt.Errorf("reading enum skb_drop_reason from the kernel's BTF: %w", err)
	}
	r := &dropReasons{kernel: kernel, core: enumNames(reasons, "SKB_DROP_REASON_"), subsystems: map[uint32]string{},
		loadModule: loadModule, modules: map[uint32]map[uint32]string{}}
	var subsys *btf.Enum
	if err := kernel.TypeByName("skb_drop_reason_subsys", &subsys); err == nil {
		r.subsystems = enumNames(subsys, "SKB_DROP_REASON_SUBSYS_")
	}
	return r, nil
}

// enumNames maps an enum's values to its names without prefix; where two
// names share a value the first stays.
func enumNames(e *btf.Enum, prefix string) map[uint32]string {
	out := make(map[uint32]string, len(e.Values))
	for _, v := range e.Values {
		if _, dup := out[uint32(v.Value)]; !dup {
			out[uint32(v.Value)] = strings.TrimPrefix(v.Name, prefix)
		}
	}
	return out
}

// name returns a reason's label: its name, or its number where neither
// the kernel nor the subsystem's module names it.
func (r *dropReasons) name(reason uint32) string {
	sub := reason >> 16
	names := r.core
	if sub != 0 {
		r.mu.Lock()
		var read bool
		if names, read = r.modules[sub]; !read {
			names = r.subsystemNames(sub)
			r.modules[sub] = names
		}
		r.mu.Unlock()
	}
	if n, ok := names[reason]; ok {
		return n
	}
	return strconv.FormatUint(uint64(reason), 10)
}

// subsystemNames reads the names of a subsystem's reasons, the
// enumerators of its enum that carry the subsystem in their upper bits.
// Nil when the subsystem, its enum or its module is unknown here.
func (r *dropReasons) subsystemNames(sub uint32) map[uint32]string {
	where, ok := dropSubsystems[r.subsystems[sub]]
	if !ok {
		return nil
	}
	var e *btf.Enum
	if err := r.kernel.TypeByName(where.enum, &e); err != nil {
		spec, err := r.loadModule(where.module)
		if err != nil {
			return nil
		}
		if err := spec.TypeByName(where.enum, &e); err != nil {
			return nil
		}
	}
	names := map[uint32]string{}
	for _, v := range e.Values {
		if uint32(v.Value)>>16 == sub {
			if _, dup := names[uint32(v.Value)]; !dup {
				names[uint32(v.Value)] = v.Name
			}
		}
	}
	return names
}
