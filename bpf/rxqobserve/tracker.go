package rxqobserve

import (
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
)

// Attachment is one attach mode (native, generic, offload) of one device.
type Attachment struct {
	Ifindex uint32
	Mode    string
}

// Target is the program attached at an attachment, and the RX queues of
// its device to count.
type Target struct {
	Attachment
	Prog   ebpf.ProgramID
	Queues int
}

// Refusal is a target that cannot be observed: why, and the error that
// said so.
type Refusal struct {
	Target
	Reason Reason
	Err    error
}

// ErrOpen is in the error of a Refusal whose program could not be opened
// by id (BPF_PROG_GET_FD_BY_ID, which checks CAP_SYS_ADMIN).
var ErrOpen = errors.New("opening the program by id (BPF_PROG_GET_FD_BY_ID)")

// ReasonOffloaded: a program offloaded to the NIC runs on the NIC, where no
// trampoline reaches it.
const ReasonOffloaded Reason = "offloaded"

// attached is one program at one attachment.
type attached struct {
	Attachment
	prog ebpf.ProgramID
}

// cell is one counter cell of a device.
type cell struct {
	queue, cpu int
	verdict    ObserverVerdict
}

// Tracker follows the programs attached to devices: it observes each new
// one and closes the observer of each program that was replaced or
// detached, so that an observer never pins a dead program, keeping the
// closed observers' counts so that a device's counters go on across
// replacements. It never attaches, detaches or replaces an XDP program.
// It is not safe for concurrent use.
type Tracker struct {
	watching map[Attachment]*Observer
	refused  map[attached]Reason
	retired  map[uint32]map[cell]Count // by ifindex
}

// NewTracker returns a tracker that watches nothing yet.
func NewTracker() *Tracker {
	return &Tracker{watching: map[Attachment]*Observer{}, refused: map[attached]Reason{}, retired: map[uint32]map[cell]Count{}}
}

// Follow brings the observers in line with targets, the programs attached
// now, and returns the targets newly found unobservable. present says
// whether a device still exists; a device that does not takes its counts
// along (pass nil when the listing may have missed devices).
func (t *Tracker) Follow(targets []Target, present func(ifindex uint32) bool) ([]Refusal, error) {
	now := map[Attachment]ebpf.ProgramID{}
	var refusals []Refusal
	var errs []error
	for _, tg := range targets {
		now[tg.Attachment] = tg.Prog
		if o := t.watching[tg.Attachment]; o != nil && o.Target() == tg.Prog {
			continue
		}
		errs = append(errs, t.retire(tg.Attachment))
		if r := t.observe(tg); r != nil {
			refusals = append(refusals, *r)
		}
	}
	for at := range t.watching {
		if _, ok := now[at]; !ok {
			errs = append(errs, t.retire(at))
		}
	}
	for a := range t.refused {
		if now[a.Attachment] != a.prog {
			delete(t.refused, a)
		}
	}
	if present != nil {
		for ifindex := range t.retired {
			if !present(ifindex) {
				delete(t.retired, ifindex)
			}
		}
	}
	return refusals, errors.Join(errs...)
}

// observe attaches an observer to tg's program, or records why it cannot.
func (t *Tracker) observe(tg Target) *Refusal {
	if _, ok := t.refused[attached{tg.Attachment, tg.Prog}]; ok {
		return nil
	}
	refuse := func(reason Reason, err error) *Refusal {
		t.refused[attached{tg.Attachment, tg.Prog}] = reason
		return &Refusal{Target: tg, Reason: reason, Err: err}
	}
	if tg.Mode == "offload" {
		return refuse(ReasonOffloaded, errors.New("the program runs on the NIC"))
	}
	prog, err := ebpf.NewProgramFromID(tg.Prog)
	if errors.Is(err, os.ErrNotExist) {
		return nil // replaced since the listing; the next one sees its successor
	}
	if err != nil {
		return refuse(Unobservable(err), fmt.Errorf("%w: %w", ErrOpen, err))
	}
	defer prog.Close() // the observer's link holds its own reference
	o, err := New(prog, int(tg.Ifindex), tg.Queues)
	if err != nil {
		return refuse(Unobservable(err), err)
	}
	t.watching[tg.Attachment] = o
	return nil
}

// retire closes the observer of at, keeping its last counts.
func (t *Tracker) retire(at Attachment) error {
	o := t.watching[at]
	if o == nil {
		return nil
	}
	delete(t.watching, at)
	counts, err := o.Read()
	cells := t.retired[at.Ifindex]
	if cells == nil {
		cells = map[cell]Count{}
		t.retired[at.Ifindex] = cells
	}
	addCounts(cells, counts)
	return errors.Join(err, o.Close())
}

func addCounts(cells map[cell]Count, counts []Count) {
	for _, n := range counts {
		k := cell{n.Queue, n.CPU, n.Verdict}
		sum := cells[k]
		sum.Queue, sum.CPU, sum.Verdict = n.Queue, n.CPU, n.Verdict
		sum.Packets += n.Packets
		sum.Bytes += n.Bytes
		cells[k] = sum
	}
}

// Device is what a tracker knows of one device's attachments.
type Device struct {
	// Counts are the device's counts, retired plus live, one per queue,
	// CPU and verdict.
	Counts []Count
	// Observed are the programs observed, by mode.
	Observed map[string]ebpf.ProgramID
	// Unobservable are the attached programs that cannot be observed, by
	// mode.
	Unobservable map[string]Reason
}

// Read reads the device's counts at the attachments whose programs are
// progs (by mode).
func (t *Tracker) Read(ifindex uint32, progs map[string]ebpf.ProgramID) (Device, error) {
	d := Device{Observed: map[string]ebpf.ProgramID{}, Unobservable: map[string]Reason{}}
	cells := map[cell]Count{}
	for k, n := range t.retired[ifindex] {
		cells[k] = n
	}
	var errs []error
	for mode, prog := range progs {
		at := Attachment{ifindex, mode}
		if o := t.watching[at]; o != nil {
			counts, err := o.Read()
			errs = append(errs, err)
			addCounts(cells, counts)
			d.Observed[mode] = o.Target()
		}
		if reason, ok := t.refused[attached{at, prog}]; ok {
			d.Unobservable[mode] = reason
		}
	}
	for _, n := range cells {
		d.Counts = append(d.Counts, n)
	}
	return d, errors.Join(errs...)
}

// Close closes every observer.
func (t *Tracker) Close() error {
	var errs []error
	for at, o := range t.watching {
		errs = append(errs, o.Close())
		delete(t.watching, at)
	}
	return errors.Join(errs...)
}
