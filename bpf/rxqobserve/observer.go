// Package rxqobserve counts the packets of an XDP program the exporter did
// not attach, by RX queue, CPU and verdict, without touching it: an fexit
// program on the target (the BPF trampoline) sees the target's struct
// xdp_buff and its return value after every run.
//
// One Observer watches one target program on one device. Packets the
// target runs on for another device are not counted by it: a program
// attached to several devices gets one Observer per device.
//
// Tail calls do not return through their callee's trampoline but through
// the caller's, so the entry program's observer sees the chain's final
// verdict. The target must
// carry BTF (its function's type is the trampoline's prototype), run
// JITed, and the kernel must allow tracing programs (lockdown in
// confidentiality mode, or a kernel without BPF trampolines, refuses).
package rxqobserve

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"
)

// ErrNoBTF is a target loaded without BTF: the trampoline has no function
// type to take its prototype from.
var ErrNoBTF = errors.New("the XDP program was loaded without BTF, which an fexit program needs to attach to it")

// Reason classifies why a program cannot be observed, for a bounded label.
type Reason string

// The reasons Unobservable gives.
const (
	// ReasonNoBTF: the target has no BTF (ErrNoBTF).
	ReasonNoBTF Reason = "no_btf"
	// ReasonNotPermitted: the kernel refused the tracing program (EPERM,
	// EACCES): lockdown, a security module, missing capabilities, or a
	// kernel configured to refuse fentry/fexit.
	ReasonNotPermitted Reason = "not_permitted"
	// ReasonNotSupported: the kernel has no BPF trampoline for this
	// target (ENOTSUPP, EOPNOTSUPP).
	ReasonNotSupported Reason = "not_supported"
	// ReasonBusy: the kernel would not put a trampoline on the target
	// (EBUSY): its function is replaced by an extension, as in libxdp's
	// dispatcher of one component.
	ReasonBusy Reason = "busy"
	// ReasonRefused: the verifier or the attach refused the pair
	// (EINVAL): a target that is not JITed, or of a kind fexit cannot
	// trace.
	ReasonRefused Reason = "refused"
	// ReasonError: any other error.
	ReasonError Reason = "error"
)

// errENOTSUPP is the kernel's internal ENOTSUPP (524), which bpf(2)
// returns as is where an architecture lacks a trampoline.
const errENOTSUPP = unix.Errno(524)

// Unobservable says why err, from New, leaves a program unobserved.
func Unobservable(err error) Reason {
	switch {
	case errors.Is(err, ErrNoBTF):
		return ReasonNoBTF
	case errors.Is(err, unix.EPERM), errors.Is(err, unix.EACCES):
		return ReasonNotPermitted
	case errors.Is(err, errENOTSUPP), errors.Is(err, unix.EOPNOTSUPP), errors.Is(err, ebpf.ErrNotSupported):
		return ReasonNotSupported
	case errors.Is(err, unix.EBUSY):
		return ReasonBusy
	case errors.Is(err, unix.EINVAL):
		return ReasonRefused
	}
	return ReasonError
}

// String is the verdict as the exporter's action label says it.
func (v ObserverVerdict) String() string {
	switch v {
	case ObserverVerdictVERDICT_ABORTED:
		return "aborted"
	case ObserverVerdictVERDICT_DROP:
		return "drop"
	case ObserverVerdictVERDICT_PASS:
		return "pass"
	case ObserverVerdictVERDICT_TX:
		return "tx"
	case ObserverVerdictVERDICT_REDIRECT:
		return "redirect"
	}
	return "unknown"
}

// Verdicts lists every verdict a Count can have, in enum order.
func Verdicts() []ObserverVerdict {
	out := make([]ObserverVerdict, ObserverVerdictVERDICTS)
	for i := range out {
		out[i] = ObserverVerdict(i)
	}
	return out
}

// QueueOutOfRange is the Queue of a Count of packets whose RX queue index
// was at or beyond the queues the Observer was sized for.
const QueueOutOfRange = -1

// Count is one non-zero counter cell: the packets and bytes (data_end -
// data when the target returned, so after any bpf_xdp_adjust_head or
// _tail it made) of one RX queue, CPU and verdict.
type Count struct {
	Queue   int
	CPU     int
	Verdict ObserverVerdict
	Packets uint64
	Bytes   uint64
}

// Observer is one fexit program attached to one target XDP program.
type Observer struct {
	prog   *ebpf.Program
	counts *ebpf.Map
	link   link.Link
	target ebpf.ProgramID
	queues int
	cpus   int
	keys   []uint32
	values []ObserverRec
	// perKey: the kernel has no batch lookup for per-CPU arrays (5.10).
	perKey bool
}

// New loads an observer for target's packets on device ifindex, with
// counters for queues RX queues, and attaches it. errors.Is(err,
// ErrNoBTF) and Unobservable(err) tell a program that cannot be observed
// from a failure.
func New(target *ebpf.Program, ifindex, queues int) (*Observer, error) {
	info, err := target.Info()
	if err != nil {
		return nil, fmt.Errorf("reading the target program's info: %w", err)
	}
	id, _ := info.ID()
	fn, err := entryFunction(info)
	if err != nil {
		return nil, err
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, err
	}
	spec, err := LoadObserver()
	if err != nil {
		return nil, err
	}
	queues = max(queues, 1)
	entries := (queues + 1) * int(ObserverVerdictVERDICTS)
	spec.Maps[ObserverMapCounts].MaxEntries = uint32(entries)
	for name, v := range map[string]uint32{ObserverVarCfgIfindex: uint32(ifindex), ObserverVarCfgQueues: uint32(queues)} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("setting %s: %w", name, err)
		}
	}
	ps := spec.Programs[ObserverProgObserve]
	ps.AttachTarget = target
	ps.AttachTo = fn
	var objs ObserverObjects
	if err := spec.LoadAndAssign(&objs, nil); err != nil {
		return nil, fmt.Errorf("loading the fexit program for XDP program %d (%s): %w", id, fn, err)
	}
	o := &Observer{prog: objs.Observe, counts: objs.Counts, target: id, queues: queues, cpus: cpus,
		keys: make([]uint32, entries), values: make([]ObserverRec, entries*cpus)}
	if o.link, err = link.AttachTracing(link.TracingOptions{Program: objs.Observe}); err != nil {
		return nil, errors.Join(fmt.Errorf("attaching fexit to XDP program %d (%s): %w", id, fn, err), o.Close())
	}
	return o, nil
}

// entryFunction is the name of the target's entry function in its BTF:
// the function at instruction 0.
func entryFunction(info *ebpf.ProgramInfo) (string, error) {
	if _, ok := info.BTFID(); !ok {
		return "", ErrNoBTF
	}
	funcs, err := info.FuncInfos()
	if err != nil {
		return "", fmt.Errorf("reading the target's function info: %w", err)
	}
	for _, f := range funcs {
		if f.Offset == 0 {
			return f.Func.Name, nil
		}
	}
	return "", errors.New("the target's BTF has no function at instruction 0")
}

// Target is the id of the observed program.
func (o *Observer) Target() ebpf.ProgramID { return o.target }

// ProgramInfo describes the observer's own fexit program.
func (o *Observer) ProgramInfo() (*ebpf.ProgramInfo, error) { return o.prog.Info() }

// Read returns every non-zero cell, with one batch lookup of the counters
// where the kernel has it (5.11+ for per-CPU arrays), else one lookup per
// cell.
func (o *Observer) Read() ([]Count, error) {
	if err := o.lookup(); err != nil {
		return nil, fmt.Errorf("reading the observer's counters: %w", err)
	}
	var out []Count
	verdicts := int(ObserverVerdictVERDICTS)
	for i := range o.keys {
		slot := int(o.keys[i])
		queue := slot / verdicts
		if queue >= o.queues {
			queue = QueueOutOfRange
		}
		for cpu, r := range o.values[i*o.cpus : (i+1)*o.cpus] {
			if r.Packets == 0 {
				continue
			}
			out = append(out, Count{Queue: queue, CPU: cpu, Verdict: ObserverVerdict(slot % verdicts), Packets: r.Packets, Bytes: r.Bytes})
		}
	}
	return out, nil
}

// lookup fills keys and values with every cell.
func (o *Observer) lookup() error {
	if !o.perKey {
		var cursor ebpf.MapBatchCursor
		_, err := o.counts.BatchLookup(&cursor, o.keys, o.values, nil)
		if !errors.Is(err, ebpf.ErrNotSupported) {
			if errors.Is(err, ebpf.ErrKeyNotExist) {
				return nil
			}
			return err
		}
		o.perKey = true
	}
	var perCPU []ObserverRec
	for i := range o.keys {
		o.keys[i] = uint32(i)
		if err := o.counts.Lookup(o.keys[i], &perCPU); err != nil {
			return err
		}
		copy(o.values[i*o.cpus:(i+1)*o.cpus], perCPU)
	}
	return nil
}

// Close detaches the observer and frees its program and map; the target
// is untouched.
func (o *Observer) Close() error {
	var errs []error
	if o.link != nil {
		errs = append(errs, o.link.Close())
	}
	errs = append(errs, o.prog.Close(), o.counts.Close())
	return errors.Join(errs...)
}
