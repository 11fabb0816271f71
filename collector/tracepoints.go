package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// tracepointProgram is one tp_btf program of a BPF object and the
// tracepoint prototype it was written for: the kernel's TP_PROTO arguments
// (without the leading void *__data), as protoParam renders them, "*"
// matching any type. Only the arguments the program reads are listed:
// tp_btf arguments are positional, so a kernel whose prototype differs
// there would feed the program other values, and the program is not
// loaded.
type tracepointProgram struct {
	prog   string
	params []string
	// superseded marks a tracepoint that newer kernels removed because
	// another one now carries its events: its absence loses nothing and
	// is not reported as unsupported.
	superseded bool
}

// attachedTracepoint is a loaded program and its link.
type attachedTracepoint struct {
	tracepoint string // "group:name", as in tracefs
	prog       *ebpf.Program
	link       link.Link
}

// tracepointSet is what the xdp and napi collectors share: the maps of
// one BPF object, its programs loaded one by one against those maps and
// attached, and which tracepoints attached. A program whose tracepoint the
// kernel lacks (INFO: upstream removes tracepoints) or refuses (WARN) is
// logged once and only its counters go missing; missing permission fails
// the whole set.
type tracepointSet struct {
	maps     map[string]*ebpf.Map
	progs    []attachedTracepoint
	attached map[string]bool // tracepoint -> attached, for those tried
	absent   []string        // tracepoints this kernel does not have
	failed   []string        // tracepoints it has that did not attach
}

// loadTracepoints creates spec's maps and attaches every program in progs
// whose tracepoint is in group (xdp, napi, irq: the tracefs group, which
// tp_btf names leave out). It fails when BPF is not permitted, when the
// kernel has no BTF, or when no program attached.
func loadTracepoints(collector string, logger *slog.Logger, spec *ebpf.CollectionSpec, progs []tracepointProgram, group func(prog string) string) (_ *tracepointSet, err error) {
	kernel, err := kernelBTF(collector)
	if err != nil {
		return nil, err
	}
	s := &tracepointSet{maps: map[string]*ebpf.Map{}, attached: map[string]bool{}}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	for name, ms := range spec.Maps {
		m, err := ebpf.NewMap(ms)
		if err != nil {
			return nil, bpfDenied(collector, needsBPF, fmt.Errorf("creating map %s: %w", name, err))
		}
		s.maps[name] = m
	}
	cache := btf.NewCache()
	for _, tp := range progs {
		ps, ok := spec.Programs[tp.prog]
		if !ok {
			return nil, fmt.Errorf("program %s missing from the %s object", tp.prog, collector)
		}
		name := group(tp.prog) + ":" + ps.AttachTo
		if why, missing := checkProto(kernel, ps.AttachTo, tp.params); why != "" {
			// A tracepoint removed upstream (xdp_redirect_map_err on 6.18)
			// is normal on a current kernel; a changed prototype is not.
			level := slog.LevelWarn
			if missing {
				level = slog.LevelInfo
			}
			logger.Log(context.Background(), level, "tracepoint unavailable; its counters are disabled", "tracepoint", name, "reason", why)
			s.attached[name] = false
			switch {
			case missing && tp.superseded:
			case missing:
				s.absent = append(s.absent, name)
			default:
				s.failed = append(s.failed, name)
			}
			continue
		}
		if err := s.attach(spec, ps, name, cache); err != nil {
			if errors.Is(err, unix.EPERM) || errors.Is(err, unix.EACCES) {
				return nil, bpfDenied(collector, needsBPF, err)
			}
			logger.Warn("tracepoint program failed to load or attach; its counters are disabled", "tracepoint", name, "err", err)
			s.attached[name] = false
			s.failed = append(s.failed, name)
			continue
		}
		s.attached[name] = true
	}
	if len(s.progs) == 0 {
		if len(s.failed) == 0 {
			return nil, Unsupported("none of the %s collector's tracepoints exists in this kernel", collector)
		}
		return nil, fmt.Errorf("no %s tracepoint could be attached", collector)
	}
	return s, nil
}

// attach loads one program against the shared maps and attaches it.
func (s *tracepointSet) attach(spec *ebpf.CollectionSpec, ps *ebpf.ProgramSpec, tracepoint string, cache *btf.Cache) error {
	one := &ebpf.CollectionSpec{
		Maps:     spec.Maps,
		Programs: map[string]*ebpf.ProgramSpec{ps.Name: ps},
		Types:    spec.Types,
	}
	coll, err := ebpf.NewCollectionWithOptions(one, ebpf.CollectionOptions{MapReplacements: s.maps, Cache: cache})
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
	s.progs = append(s.progs, attachedTracepoint{tracepoint: tracepoint, prog: prog, link: l})
	return nil
}

// emitAttached sends one gauge per tracepoint tried: 1 attached, 0 not.
func (s *tracepointSet) emitAttached(ch chan<- prometheus.Metric, fams familyFilter, f *Family) {
	for tp, ok := range s.attached {
		v := 0.0
		if ok {
			v = 1
		}
		fams.send(ch, f, v, tp)
	}
}

// missingErr names the tracepoints that did not attach: ErrUnsupported for
// those the kernel lacks, ErrUnavailable (a failure, logged at start-up)
// for those it refused; nil when all attached.
func (s *tracepointSet) missingErr() error {
	var errs []error
	if len(s.absent) > 0 {
		errs = append(errs, Unsupported("the kernel has no tracepoint %s", strings.Join(s.absent, ", ")))
	}
	if len(s.failed) > 0 {
		errs = append(errs, fmt.Errorf("%w: tracepoints not attached: %s", ErrUnavailable, strings.Join(s.failed, ", ")))
	}
	return errors.Join(errs...)
}

// Close detaches every program and releases the maps.
func (s *tracepointSet) Close() error {
	var errs []error
	for _, p := range s.progs {
		errs = append(errs, p.link.Close(), p.prog.Close())
	}
	for _, m := range s.maps {
		errs = append(errs, m.Close())
	}
	s.progs, s.maps = nil, nil
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
