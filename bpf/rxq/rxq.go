package rxq

import (
	"errors"
	"fmt"
	"io"
	"math/bits"
	"sync/atomic"
	"unsafe"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"
)

// Config is the load-time configuration of the rxq program. The values
// become read-only globals, so the verifier prunes the paths not taken.
type Config struct {
	// Action is the verdict: XDPPass, XDPDrop, XDPTx (with a MAC swap) or
	// XDPRedirect (into the devmap RxqRedirect, slot 0).
	Action XDPAction
	// Read reads the Ethernet header before the verdict.
	Read bool
	// CheckIfindex counts packets whose ctx->ingress_ifindex is not
	// Ifindex as issues instead of counting them per queue, as
	// xdp_rxq_info does.
	CheckIfindex bool
	Ifindex      int
	// Queues is the number of RX queues counted; a packet from a higher
	// ctx->rx_queue_index is counted as an issue. 256 when zero.
	Queues int
}

// XDPAction is an XDP verdict (enum xdp_action).
type XDPAction uint32

// The verdicts the rxq program can return.
const (
	XDPAborted  XDPAction = 0
	XDPDrop     XDPAction = 1
	XDPPass     XDPAction = 2
	XDPTx       XDPAction = 3
	XDPRedirect XDPAction = 4
)

// rxqCountsSection is the data section holding rxq_counts; its map is
// sized at load time.
const rxqCountsSection = ".data.rxq_counts"

// rxqActionNames name the verdicts in the programs' names.
var rxqActionNames = map[XDPAction]string{
	XDPPass: "pass", XDPDrop: "drop", XDPTx: "tx", XDPRedirect: "redirect",
}

// Program is a loaded rxq program with its maps.
type Program struct {
	Prog *ebpf.Program
	// Redirect is the devmap of XDPRedirect; the caller fills slot 0.
	Redirect *ebpf.Map
	// Counts is the single-element array behind rxq_counts.
	Counts *ebpf.Map

	queues   int
	cpus     int
	rowShift uint
	mem      []byte // Counts, mapped read-only
}

// Counts is one reading of the counters, per CPU: Queue[q][cpu] for
// each counted queue, and the issues.
type Counts struct {
	Queue [][]RxqRxqRec
	// QueueOutOfRange: packets from a ctx->rx_queue_index beyond the
	// counted queues.
	QueueOutOfRange []RxqRxqRec
	// IfindexMismatch: packets from another device (only with
	// CheckIfindex).
	IfindexMismatch []RxqRxqRec
}

// Load loads the rxq program with cfg applied, sizing its
// counters for cfg.Queues queues on every possible CPU. The caller closes
// it; for XDPRedirect it also fills RxqRedirect slot 0.
func Load(cfg Config) (*Program, error) {
	action, ok := rxqActionNames[cfg.Action]
	if !ok {
		return nil, fmt.Errorf("rxq: unsupported XDP action %d", cfg.Action)
	}
	// One program per combination of the options (see rxq.c).
	prog := "xdp_rxq_" + action
	if cfg.Read {
		prog += "_read"
	}
	if cfg.CheckIfindex {
		prog += "_ifindex"
	}
	queues := cfg.Queues
	if queues <= 0 {
		queues = 256
	}
	cpus, err := ebpf.PossibleCPU()
	if err != nil {
		return nil, fmt.Errorf("rxq: counting possible CPUs: %w", err)
	}
	// A row holds every slot (the queues and two issue slots of 16
	// bytes), at least a cache line, in a power of two of bytes so that
	// the program finds a CPU's row with a shift; the row count is a
	// power of two so that a mask bounds the CPU number for the verifier.
	rowShift := uint(max(6, bits.Len(uint((queues+2)*16-1))))
	rows := 1 << bits.Len(uint(cpus-1))

	spec, err := LoadRxq()
	if err != nil {
		return nil, err
	}
	counts := spec.Maps[rxqCountsSection]
	if counts == nil {
		return nil, fmt.Errorf("rxq: the object has no %s section", rxqCountsSection)
	}
	counts.ValueSize = uint32(rows << rowShift)
	// The section's BTF and contents describe its compile-time size.
	counts.Value, counts.Contents = nil, nil
	// Mmapable array values start on a page, so rows are cache-line
	// aligned; the collector reads them through the mapping.
	counts.Flags |= unix.BPF_F_MMAPABLE
	for name, v := range map[string]any{
		"cfg_ifindex":   uint32(cfg.Ifindex),
		"cfg_queues":    uint32(queues),
		"cfg_cpu_mask":  uint32(rows - 1),
		"cfg_row_shift": uint32(rowShift),
	} {
		if err := spec.Variables[name].Set(v); err != nil {
			return nil, fmt.Errorf("rxq: setting %s: %w", name, err)
		}
	}
	// Only the configured program: the others would cost verifier time.
	if spec.Programs[prog] == nil {
		return nil, fmt.Errorf("rxq: the object has no program %s", prog)
	}
	for name := range spec.Programs {
		if name != prog {
			delete(spec.Programs, name)
		}
	}
	coll, err := ebpf.NewCollection(spec)
	if err != nil {
		return nil, fmt.Errorf("loading the rxq XDP program: %w", err)
	}
	defer coll.Close()
	r := &Program{
		Prog:     coll.DetachProgram(prog),
		Redirect: coll.DetachMap(RxqMapRxqRedirect),
		Counts:   coll.DetachMap(rxqCountsSection),
		queues:   queues, cpus: cpus, rowShift: rowShift,
	}
	if r.mem, err = unix.Mmap(r.Counts.FD(), 0, int(counts.ValueSize), unix.PROT_READ, unix.MAP_SHARED); err != nil {
		return nil, errors.Join(fmt.Errorf("rxq: mapping the counters: %w", err), r.Close())
	}
	return r, nil
}

// Queues is the number of RX queues counted.
func (r *Program) Queues() int { return r.queues }

// Read returns the counters. Each is read with one atomic 64-bit load, as
// the program writes it with one store, so no value is ever torn (a plain
// copy of the mapping gives no such promise).
func (r *Program) Read() Counts {
	slot := func(s int) []RxqRxqRec {
		out := make([]RxqRxqRec, r.cpus)
		for cpu := range out {
			off := cpu<<r.rowShift + s*int(unsafe.Sizeof(RxqRxqRec{}))
			out[cpu].Packets = atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[off])))
			out[cpu].Bytes = atomic.LoadUint64((*uint64)(unsafe.Pointer(&r.mem[off+8])))
		}
		return out
	}
	c := Counts{Queue: make([][]RxqRxqRec, r.queues)}
	for q := range c.Queue {
		c.Queue[q] = slot(q)
	}
	c.QueueOutOfRange = slot(r.queues)
	c.IfindexMismatch = slot(r.queues + 1)
	return c
}

// Close unmaps the counters and frees the program and maps (the kernel
// keeps the program while a link holds it).
func (r *Program) Close() error {
	var errs []error
	if r.mem != nil {
		errs = append(errs, unix.Munmap(r.mem))
		r.mem = nil
	}
	for _, c := range []io.Closer{r.Prog, r.Redirect, r.Counts} {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}
