// Package xdpdispatch reads libxdp's multi-program dispatcher, the XDP
// program that xdp-loader and every libxdp user (AF_XDP sockets bound with
// libxdp's defaults among them) put on a device to run several programs:
// which component programs it calls, in which slot, with which run
// priority and chain-call actions. It follows the protocol libxdp
// documents ("Protocol for atomic loading of multi-prog dispatchers",
// lib/libxdp/protocol.org of xdp-tools) and only reads.
package xdpdispatch

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
)

// Name is the dispatcher's program name.
const Name = "xdp_dispatcher"

// Slots is MAX_DISPATCHER_ACTIONS: the dispatcher's stub functions prog0
// to prog9, one per component.
const Slots = 10

// Component is one program the dispatcher calls.
type Component struct {
	// Slot is the stub function the component replaces (progN): the
	// dispatcher calls the slots in order.
	Slot int
	Prog ebpf.ProgramID
	// Link is the freplace bpf_link that holds the component in the
	// dispatcher.
	Link link.ID
	// Priority is the run priority libxdp sorted the components by.
	Priority uint32
	// ChainCallActions is a bitmap of the XDP verdicts (1 << verdict)
	// with which the packet goes on to the next component; any other
	// verdict ends the chain and is the device's.
	ChainCallActions uint32
	// Entry says the component replaces the dispatcher's entry function
	// rather than a stub: Debian's libxdp 1.3.1 attaches a lone
	// component so (its freplace link's target is xdp_dispatcher, as
	// the kernel matrix's guests report), and its verdict is then the
	// device's whatever its chain-call actions.
	Entry bool
}

// Dispatcher is one dispatcher and its components, by slot.
type Dispatcher struct {
	Prog ebpf.ProgramID
	// Version is the dispatcher's configuration layout, 1 or 2.
	Version    int
	Components []Component
}

// stubRetval is XDP_DISPATCHER_RETVAL, the bit libxdp sets in every
// component's chain-call actions: what an empty stub returns.
const stubRetval = 31

// Verdicts names the bits of ChainCallActions that are XDP verdicts, in
// enum xdp_action's order (include/uapi/linux/bpf.h).
var Verdicts = []string{"aborted", "drop", "pass", "tx", "redirect"}

// ChainCallNames is the component's chain-call verdicts, comma-separated
// in enum xdp_action's order, without libxdp's stub bit.
func (c Component) ChainCallNames() string {
	var names []string
	for v, name := range Verdicts {
		if c.ChainCallActions&(1<<v) != 0 {
			names = append(names, name)
		}
	}
	return strings.Join(names, ",")
}

// ChainCalls reports whether verdict v passes the packet on.
func (c Component) ChainCalls(v uint32) bool { return v < 32 && c.ChainCallActions&(1<<v) != 0 }

// config is struct xdp_dispatcher_config as the dispatcher's frozen
// .rodata map holds it.
type config struct {
	version  int
	enabled  int
	actions  [Slots]uint32
	priority [Slots]uint32
}

// magic is XDP_DISPATCHER_MAGIC ('X' + 'D' + 'P'), the first byte of a
// version 2 configuration.
const magic = 236

// decodeConfig decodes the configuration of version 2 (magic, version,
// num_progs_enabled, is_xdp_frags, then chain_call_actions[10],
// run_prios[10], program_flags[10]: 124 bytes) or version 1
// (num_progs_enabled padded to 4 bytes, chain_call_actions[10],
// run_prios[10]: 84 bytes).
func decodeConfig(b []byte) (config, error) {
	var c config
	switch {
	case len(b) >= 4+3*4*Slots && b[0] == magic:
		c.version, c.enabled = int(b[1]), int(b[2])
		if c.version != 2 {
			return c, fmt.Errorf("dispatcher configuration of version %d, which this exporter does not know (it reads 1 and 2)", c.version)
		}
	case len(b) == 4+2*4*Slots:
		c.version, c.enabled = 1, int(b[0])
	default:
		return c, fmt.Errorf("dispatcher configuration of %d bytes is neither version 1 (84) nor version 2 (124 with magic %d)", len(b), magic)
	}
	if c.enabled > Slots {
		return c, fmt.Errorf("dispatcher configuration enables %d programs, more than its %d slots", c.enabled, Slots)
	}
	for i := range Slots {
		c.actions[i] = binary.NativeEndian.Uint32(b[4+4*i:])
		c.priority[i] = binary.NativeEndian.Uint32(b[4+4*Slots+4*i:])
	}
	return c, nil
}

// ErrNoTarget is a kernel whose tracing link info lacks the target (before
// Linux 5.13) where libxdp's pins are not found either.
var ErrNoTarget = errors.New("the kernel's freplace link info has no target (Linux 5.13 added it) and libxdp's pins are not under the bpffs directory")

// Read reads the dispatcher prog, attached to device ifindex: its
// configuration, then its components from the freplace links that target
// it (Linux 5.13) or, on older kernels, from libxdp's pins under bpffs
// (dispatch-IFINDEX-ID/progN-prog and progN-link). It returns nil
// without error for a program that is not a dispatcher.
func Read(prog *ebpf.Program, ifindex uint32, bpffs string) (*Dispatcher, error) {
	info, err := prog.Info()
	if err != nil {
		return nil, fmt.Errorf("reading the program's info: %w", err)
	}
	if info.Name != Name {
		return nil, nil
	}
	id, _ := info.ID()
	d := &Dispatcher{Prog: id}
	cfg, err := readConfig(info)
	if err != nil {
		return nil, fmt.Errorf("dispatcher %d: %w", id, err)
	}
	d.Version = cfg.version
	slots, err := linkedSlots(info, id)
	if errors.Is(err, errNoLinkTarget) {
		slots, err = pinnedSlots(filepath.Join(bpffs, "xdp", fmt.Sprintf("dispatch-%d-%d", ifindex, id)))
	}
	if err != nil {
		return nil, fmt.Errorf("dispatcher %d: %w", id, err)
	}
	for slot := range cfg.enabled {
		c, ok := slots[slot]
		if !ok {
			continue // a component detached on its own: the stub runs
		}
		c.Slot, c.Priority, c.ChainCallActions = slot, cfg.priority[slot], cfg.actions[slot]&^(1<<stubRetval)
		d.Components = append(d.Components, c)
	}
	return d, nil
}

// readConfig reads the configuration from the dispatcher's .rodata map.
func readConfig(info *ebpf.ProgramInfo) (config, error) {
	ids, _ := info.MapIDs()
	for _, mid := range ids {
		m, err := ebpf.NewMapFromID(mid)
		if err != nil {
			return config{}, fmt.Errorf("opening map %d: %w", mid, err)
		}
		mi, err := m.Info()
		if err != nil || !strings.HasSuffix(mi.Name, ".rodata") {
			m.Close()
			continue
		}
		var b []byte
		err = m.Lookup(uint32(0), &b)
		m.Close()
		if err != nil {
			return config{}, fmt.Errorf("reading its configuration (map %d): %w", mid, err)
		}
		return decodeConfig(b)
	}
	return config{}, errors.New("no .rodata map: not libxdp's dispatcher")
}

var errNoLinkTarget = errors.New("freplace links without a target")

// linkedSlots finds the freplace links whose target is the dispatcher and
// names each one's slot by the stub function (progN) its target BTF id
// is in the dispatcher's BTF.
func linkedSlots(info *ebpf.ProgramInfo, id ebpf.ProgramID) (map[int]Component, error) {
	out := map[int]Component{}
	var spec *btf.Spec
	untargeted := false
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		li, err := it.Link.Info()
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading bpf_link %d: %w", it.ID, err)
		}
		tr := li.Tracing()
		// An freplace link's attach type is the extension's expected
		// attach type, 0; fentry, fexit and the others have their own.
		if li.Type != link.TracingType || tr == nil || tr.AttachType != 0 {
			continue
		}
		if tr.TargetObjectId == 0 {
			untargeted = true
			continue
		}
		if ebpf.ProgramID(tr.TargetObjectId) != id {
			continue
		}
		if spec == nil {
			if spec, err = programBTF(info); err != nil {
				return nil, err
			}
		}
		fn, err := targetFunc(spec, btf.TypeID(tr.TargetBtfId))
		if err != nil {
			return nil, err
		}
		if fn == Name {
			out[0] = Component{Prog: li.Program, Link: li.ID, Entry: true}
			continue
		}
		slot, err := parseSlot(fn, "prog", "")
		if err != nil {
			return nil, err
		}
		out[slot] = Component{Prog: li.Program, Link: li.ID}
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("listing bpf_links (BPF_LINK_GET_NEXT_ID): %w", err)
	}
	if len(out) == 0 && untargeted {
		return nil, errNoLinkTarget
	}
	return out, nil
}

func programBTF(info *ebpf.ProgramInfo) (*btf.Spec, error) {
	bid, ok := info.BTFID()
	if !ok {
		return nil, errors.New("the dispatcher has no BTF")
	}
	h, err := btf.NewHandleFromID(bid)
	if err != nil {
		return nil, fmt.Errorf("opening the dispatcher's BTF %d: %w", bid, err)
	}
	defer h.Close()
	return h.Spec(nil)
}

// targetFunc is the name of the function BTF type id is in the
// dispatcher: a stub progN, or its entry function.
func targetFunc(spec *btf.Spec, id btf.TypeID) (string, error) {
	t, err := spec.TypeByID(id)
	if err != nil {
		return "", fmt.Errorf("the dispatcher's BTF has no type %d: %w", id, err)
	}
	fn, ok := t.(*btf.Func)
	if !ok {
		return "", fmt.Errorf("the dispatcher's BTF type %d is %s, not a function", id, t)
	}
	return fn.Name, nil
}

// parseSlot is N of prefix+N+suffix, a slot of the dispatcher.
func parseSlot(name, prefix, suffix string) (int, error) {
	n, ok := strings.CutPrefix(name, prefix)
	if ok {
		n, ok = strings.CutSuffix(n, suffix)
	}
	slot, err := strconv.Atoi(n)
	if !ok || err != nil || slot < 0 || slot >= Slots {
		return 0, fmt.Errorf("%q is not one of the dispatcher's slots %s0%s to %s%d%s", name, prefix, suffix, prefix, Slots-1, suffix)
	}
	return slot, nil
}

// pinnedSlots reads libxdp's pins of one dispatcher: progN-prog, and
// progN-link where present.
func pinnedSlots(dir string) (map[int]Component, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (%s)", ErrNoTarget, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("reading libxdp's pins: %w", err)
	}
	out := map[int]Component{}
	for _, e := range ents {
		slot, err := parseSlot(e.Name(), "prog", "-prog")
		if err != nil {
			continue
		}
		p, err := ebpf.LoadPinnedProgram(filepath.Join(dir, e.Name()), nil)
		if err != nil {
			return nil, fmt.Errorf("opening libxdp's pin %s: %w", e.Name(), err)
		}
		pi, err := p.Info()
		p.Close()
		if err != nil {
			return nil, err
		}
		c := Component{}
		c.Prog, _ = pi.ID()
		if l, err := link.LoadPinnedLink(filepath.Join(dir, fmt.Sprintf("prog%d-link", slot)), nil); err == nil {
			if li, err := l.Info(); err == nil {
				c.Link = li.ID
			}
			l.Close()
		}
		out[slot] = c
	}
	return out, nil
}
