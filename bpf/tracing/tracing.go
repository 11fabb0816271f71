// Package tracing loads the tp_btf programs of a BPF object one by one
// against the object's shared maps, after checking each tracepoint's
// prototype in the kernel's BTF, so that a tracepoint the running kernel
// lacks or changed loses only its own program.
package tracing

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// Program is one tp_btf program of a BPF object and the tracepoint
// prototype it was written for: the kernel's TP_PROTO arguments (without
// the leading void *__data), as protoParam renders them, "*" matching any
// type. Only the arguments the program reads are listed: tp_btf arguments
// are positional, so a kernel whose prototype differs there would feed the
// program other values, and the program is not loaded.
type Program struct {
	Name   string
	Params []string
	// Superseded marks a tracepoint that newer kernels removed because
	// another one now carries its events: its absence loses nothing and
	// is not reported as absent.
	Superseded bool
}

// Attached is a loaded program and its link.
type Attached struct {
	Tracepoint string // "group:name", as in tracefs
	Prog       *ebpf.Program
	link       link.Link
}

// Set is the maps of one BPF object, its programs loaded one by one
// against those maps and attached, and which tracepoints attached. A
// program whose tracepoint the kernel lacks (INFO: upstream removes
// tracepoints) or refuses (WARN) is logged once and only its counters go
// missing; missing permission fails the whole set.
type Set struct {
	Maps  map[string]*ebpf.Map
	Progs []Attached
	// Attached says, for each tracepoint tried, whether it attached.
	Attached map[string]bool
	// Absent are the tracepoints this kernel does not have, Failed those
	// it has that did not attach.
	Absent, Failed []string
}

// What a kernel lacks is not supported here (errors.ErrUnsupported), not a
// failure.
var (
	// ErrNoBTF: the kernel has no BTF, which tp_btf and fexit programs
	// and CO-RE relocations need.
	ErrNoBTF = fmt.Errorf("%w: kernel BTF (/sys/kernel/btf/vmlinux) unavailable; tp_btf and fexit programs need a kernel built with CONFIG_DEBUG_INFO_BTF", errors.ErrUnsupported)
	// ErrNoTracepoint: the kernel has none of the set's tracepoints.
	ErrNoTracepoint = fmt.Errorf("%w: none of the tracepoints exists in this kernel", errors.ErrUnsupported)
)

// KernelBTF loads the running kernel's BTF, or returns ErrNoBTF with its
// cause: the one check of it.
func KernelBTF() (*btf.Spec, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoBTF, err)
	}
	return spec, nil
}

// Load creates spec's maps and attaches every program in progs whose
// tracepoint is in group (xdp, napi, irq: the tracefs group, which tp_btf
// names leave out). It fails when BPF is not permitted (the kernel's EPERM
// or EACCES in the chain), when the kernel has no BTF (ErrNoBTF), or when
// no program attached (ErrNoTracepoint when the kernel has none of them).
func Load(logger *slog.Logger, spec *ebpf.CollectionSpec, progs []Program, group func(prog string) string) (_ *Set, err error) {
	kernel, err := KernelBTF()
	if err != nil {
		return nil, err
	}
	s := &Set{Maps: map[string]*ebpf.Map{}, Attached: map[string]bool{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	for name, ms := range spec.Maps {
		if strings.HasPrefix(name, ".") {
			// A data section (.rodata of the constants that anchor
			// enum types for bpf2go) is left to each program's load,
			// which makes it mmapable: constants need no sharing.
			continue
		}
		m, err := ebpf.NewMap(ms)
		if err != nil {
			return nil, fmt.Errorf("creating map %s: %w", name, err)
		}
		s.Maps[name] = m
	}
	cache := btf.NewCache()
	for _, tp := range progs {
		ps, ok := spec.Programs[tp.Name]
		if !ok {
			return nil, fmt.Errorf("program %s missing from the object", tp.Name)
		}
		name := group(tp.Name) + ":" + ps.AttachTo
		if why, missing := checkProto(kernel, ps.AttachTo, tp.Params); why != "" {
			// A tracepoint removed upstream (xdp_redirect_map_err on 6.18)
			// is normal on a current kernel; a changed prototype is not.
			level := slog.LevelWarn
			if missing {
				level = slog.LevelInfo
			}
			logger.Log(context.Background(), level, "tracepoint unavailable; its counters are disabled", "tracepoint", name, "reason", why)
			s.Attached[name] = false
			switch {
			case missing && tp.Superseded:
			case missing:
				s.Absent = append(s.Absent, name)
			default:
				s.Failed = append(s.Failed, name)
			}
			continue
		}
		if err := s.attach(spec, ps, name, cache); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				return nil, err
			}
			logger.Warn("tracepoint program failed to load or attach; its counters are disabled", "tracepoint", name, "err", err)
			s.Attached[name] = false
			s.Failed = append(s.Failed, name)
			continue
		}
		s.Attached[name] = true
	}
	if len(s.Progs) == 0 {
		if len(s.Failed) == 0 {
			return nil, ErrNoTracepoint
		}
		return nil, errors.New("no tracepoint could be attached")
	}
	return s, nil
}

// attach loads one program against the shared maps and attaches it.
func (s *Set) attach(spec *ebpf.CollectionSpec, ps *ebpf.ProgramSpec, tracepoint string, cache *btf.Cache) error {
	one := &ebpf.CollectionSpec{
		Maps:     spec.Maps,
		Programs: map[string]*ebpf.ProgramSpec{ps.Name: ps},
		Types:    spec.Types,
	}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: s.Maps, Cache: cache})
	if err != nil {
		return fmt.Errorf("loading %s: %w", ps.Name, err)
	}
	prog := coll.DetachProgram(ps.Name)
	coll.Close()
	l, err := link.AttachTracing(link.TracingOptions{Program: prog, AttachType: ebpf.AttachTraceRawTp})
	if err != nil {
		prog.Close()
		return fmt.Errorf("attaching %s: %w", ps.Name, err)
	}
	s.Progs = append(s.Progs, Attached{Tracepoint: tracepoint, Prog: prog, link: l})
	return nil
}

// Close detaches every program and releases the maps.
func (s *Set) Close() error {
	var errs []error
	for _, p := range s.Progs {
		errs = append(errs, p.link.Close(), p.Prog.Close())
	}
	for _, m := range s.Maps {
		errs = append(errs, m.Close())
	}
	s.Progs, s.Maps = nil, nil
	return errors.Join(errs...)
}

// checkProto compares the kernel's prototype of tracepoint tp (the
// btf_trace_<tp> typedef) with want. It returns "" when they agree, or why
// not, and whether the kernel lacks the tracepoint altogether.
func checkProto(kernel *btf.Spec, tp string, want []string) (string, bool) {
	typ, err := kernel.AnyTypeByName("btf_trace_" + tp)
	if errors.Is(err, btf.ErrNotFound) {
		return "the running kernel has no such tracepoint", true
	}
	if err != nil {
		return err.Error(), false
	}
	td, ok := typ.(*btf.Typedef)
	var fp *btf.FuncProto
	if ok {
		if p, ok := td.Type.(*btf.Pointer); ok {
			fp, _ = p.Target.(*btf.FuncProto)
		}
	}
	if fp == nil || len(fp.Params) == 0 {
		return fmt.Sprintf("unexpected BTF type %v for btf_trace_%s", typ, tp), false
	}
	params := fp.Params[1:] // the tracepoint's private data pointer
	got := make([]string, len(params))
	for i, p := range params {
		got[i] = protoParam(p.Type)
	}
	if len(got) < len(want) {
		return fmt.Sprintf("prototype (%s) has fewer arguments than (%s)", strings.Join(got, ", "), strings.Join(want, ", ")), false
	}
	for i, w := range want {
		if w != "*" && w != got[i] {
			return fmt.Sprintf("prototype (%s) differs from the supported (%s)", strings.Join(got, ", "), strings.Join(want, ", ")), false
		}
	}
	return "", false
}

// protoParam renders a parameter type as C does, without qualifiers.
func protoParam(t btf.Type) string {
	switch t := t.(type) {
	case *btf.Pointer:
		return protoParam(t.Target) + " *"
	case *btf.Const:
		return protoParam(t.Type)
	case *btf.Volatile:
		return protoParam(t.Type)
	case *btf.Struct:
		return "struct " + t.Name
	case *btf.Union:
		return "union " + t.Name
	case *btf.Enum:
		return "enum " + t.Name
	case *btf.Typedef:
		return t.Name
	case *btf.Int:
		return t.Name
	case *btf.Void:
		return "void"
	default:
		return fmt.Sprintf("%v", t)
	}
}
