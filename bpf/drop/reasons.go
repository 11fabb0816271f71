package drop

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/cilium/ebpf/btf"
)

// ErrNoReasons: the kernel has no enum skb_drop_reason, not supported
// here (errors.ErrUnsupported).
var ErrNoReasons = fmt.Errorf("%w: the kernel has no enum skb_drop_reason", errors.ErrUnsupported)

// Reasons names drop reasons as the running kernel does. The core
// reasons are enum skb_drop_reason of vmlinux. Since Linux 6.6 the upper
// 16 bits of a reason may name a subsystem (enum skb_drop_reason_subsys)
// whose own enum holds the full values (include/net/dropreason.h); it is
// read from vmlinux where the subsystem is built in, else from its
// module's BTF, the first time one of its reasons is seen: only a loaded
// module drops with them.
type Reasons struct {
	kernel     *btf.Spec
	core       map[uint32]string
	subsystems map[uint32]string // subsystem number -> name (OPENVSWITCH)
	loadModule func(string) (*btf.Spec, error)

	mu      sync.Mutex
	modules map[uint32]map[uint32]string // by subsystem, read once
}

// subsystem is where a subsystem of enum skb_drop_reason_subsys
// defines its reasons: the module and its enum.
type subsystem struct{ module, enum string }

var knownSubsystems = map[string]subsystem{
	"MAC80211_UNUSABLE": {"mac80211", "mac80211_drop_reason"},
	"MAC80211_MONITOR":  {"mac80211", "mac80211_drop_reason"},
	"OPENVSWITCH":       {"openvswitch", "ovs_drop_reason"},
}

// NewReasons reads the core reasons and the subsystems from the kernel's BTF;
// loadModule reads a module's BTF (btf.LoadKernelModuleSpec).
func NewReasons(kernel *btf.Spec, loadModule func(string) (*btf.Spec, error)) (*Reasons, error) {
	var reasons *btf.Enum
	if err := kernel.TypeByName("skb_drop_reason", &reasons); err != nil {
		if errors.Is(err, btf.ErrNotFound) {
			return nil, fmt.Errorf("%w: skb:kfree_skb carries drop reasons since Linux 5.17", ErrNoReasons)
		}
		return nil, fmt.Errorf("reading enum skb_drop_reason from the kernel's BTF: %w", err)
	}
	r := &Reasons{kernel: kernel, core: enumNames(reasons, "SKB_DROP_REASON_"), subsystems: map[uint32]string{},
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

// Name returns a reason's label: its name, or its number where neither
// the kernel nor the subsystem's module names it.
func (r *Reasons) Name(reason uint32) string {
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
func (r *Reasons) subsystemNames(sub uint32) map[uint32]string {
	where, ok := knownSubsystems[r.subsystems[sub]]
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
