// Package napi is the napi collector's BPF object (napi.c): napi:napi_poll
// as a histogram of the work of each poll per device and execution
// context, and irq:softirq_* per CPU and vector. It loads and attaches the
// programs and reads their maps as typed records, freeing the slots of
// devices that are gone.
package napi

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/bpf/slots"
	"github.com/xdp-exporter/xdp_exporter/bpf/tracing"
)

// MaxWork is NAPI_MAX_WORK of napi.c: the histogram has one bucket per
// work value up to it.
const MaxWork = len(NapiNapiVal{}.Polls) - 1

// contexts names enum napi_ctx.
var contexts = map[NapiNapiCtx]string{
	NapiNapiCtxCTX_OTHER: "other", NapiNapiCtxCTX_IDLE: "idle",
	NapiNapiCtxCTX_KSOFTIRQD: "ksoftirqd", NapiNapiCtxCTX_THREADED: "threaded",
}

// SoftirqVectors names the vectors as /proc/softirqs does, by number
// (include/linux/interrupt.h; the order is kernel ABI for the tracepoints).
var SoftirqVectors = [...]string{"HI", "TIMER", "NET_TX", "NET_RX", "BLOCK", "IRQ_POLL", "TASKLET", "SCHED", "HRTIMER", "RCU"}

// programs are the programs of napi.c and the prototypes they were written
// for; softirqPrograms are attached only on request.
var programs = []tracing.Program{
	{Name: NapiProgNapiPoll, Params: []string{"struct napi_struct *", "int", "int"}},
	{Name: NapiProgSoftirqEntry, Params: []string{"unsigned int"}},
	{Name: NapiProgSoftirqExit, Params: []string{"unsigned int"}},
	{Name: NapiProgSoftirqRaise, Params: []string{"unsigned int"}},
}

var softirqPrograms = map[string]bool{NapiProgSoftirqEntry: true, NapiProgSoftirqExit: true, NapiProgSoftirqRaise: true}

// The tracepoints as tracefs names them.
const (
	PollTracepoint         = "napi:napi_poll"
	SoftirqEntryTracepoint = "irq:softirq_entry"
	SoftirqExitTracepoint  = "irq:softirq_exit"
	SoftirqRaiseTracepoint = "irq:softirq_raise"
)

// group is the tracefs group of a program's tracepoint.
func group(prog string) string {
	if softirqPrograms[prog] {
		return "irq"
	}
	return "napi"
}

// Objects is the loaded object.
type Objects struct {
	*tracing.Set
	hist *slots.Table[NapiNapiKey, NapiNapiVal]
}

// Spec is the object as compiled; tests change it before New.
func Spec() (*ebpf.CollectionSpec, error) { return LoadNapi() }

// New loads and attaches napi:napi_poll, and the softirq programs when
// softirq is set; a device of another namespace that polls nothing for
// foreignIdle (reap.DefaultIdle when 0) loses its slot.
func New(spec *ebpf.CollectionSpec, softirq bool, foreignIdle time.Duration, logger *slog.Logger) (_ *Objects, err error) {
	var progs []tracing.Program
	for _, p := range programs {
		if !softirqPrograms[p.Name] || softirq {
			progs = append(progs, p)
		}
	}
	set, err := tracing.Load(logger, spec, progs, group)
	if err != nil {
		return nil, err
	}
	hist, err := slots.New[NapiNapiKey, NapiNapiVal](set.Maps[NapiMapNapiOwners], set.Maps[NapiMapNapiClaims], set.Maps[NapiMapNapiHist], foreignIdle)
	if err != nil {
		return nil, errors.Join(err, set.Close())
	}
	return &Objects{Set: set, hist: hist}, nil
}

// Polls is the histogram of one device and context.
type Polls struct {
	Device  reap.Device
	Context string
	// Polls[w] is the polls that did w packets of work.
	Polls [MaxWork + 1]uint64
	// BigPolls did more than MaxWork packets, BigWork in all.
	BigPolls, BigWork     uint64
	Exhausted, OverBudget uint64
	slot                  uint32
}

// Polls reads the histograms, freeing the slots of devices fateOf finds
// gone.
func (o *Objects) Polls(fateOf func(reap.Device) reap.Fate) ([]Polls, error) {
	entries, err := o.hist.Read(func(e slots.Entry[NapiNapiKey, NapiNapiVal]) uint64 {
		var n uint64
		e.Each(func(_ int, v *NapiNapiVal) {
			n += v.BigPolls
			for _, p := range v.Polls {
				n += p
			}
		})
		return n
	}, func(k NapiNapiKey) reap.Fate { return fateOf(k.device()) })
	out := make([]Polls, len(entries))
	for i, e := range entries {
		p := Polls{Device: e.Key.device(), Context: "unknown", slot: e.Slots[0]}
		if name, ok := contexts[NapiNapiCtx(e.Key.Context)]; ok {
			p.Context = name
		}
		e.Each(func(_ int, v *NapiNapiVal) {
			for w, n := range v.Polls {
				p.Polls[w] += n
			}
			p.BigPolls += v.BigPolls
			p.BigWork += v.BigWork
			p.Exhausted += v.Exhausted
			p.OverBudget += v.OverBudget
		})
		out[i] = p
	}
	return out, err
}

func (k NapiNapiKey) device() reap.Device { return reap.Device{Ifindex: k.Ifindex, Netns: k.Netns} }

// RecordedName is the name p's device had when its slot was claimed: the
// exporter cannot look up names in another namespace.
func (o *Objects) RecordedName(p Polls) (string, error) {
	var n NapiDevName
	if err := o.Maps[NapiMapNapiNames].Lookup(p.slot, &n); err != nil {
		return "", fmt.Errorf("reading a napi device name: %w", err)
	}
	return slots.DeviceName(n.Dev), nil
}

// Untracked is the polls not counted because every slot probed for their
// key was taken.
func (o *Objects) Untracked() (uint64, error) {
	n, err := slots.Counter(o.Maps[NapiMapNapiDropped], 0)
	if err != nil {
		return 0, fmt.Errorf("reading the untracked poll count: %w", err)
	}
	return n, nil
}

// Softirqs reads the softirq counters, [vector][cpu].
func (o *Objects) Softirqs() ([][]NapiSoftirqVal, error) {
	perVec := make([][]NapiSoftirqVal, len(SoftirqVectors))
	for vec := range SoftirqVectors {
		if err := o.Maps[NapiMapSoftirqs].Lookup(uint32(vec), &perVec[vec]); err != nil {
			return nil, fmt.Errorf("reading softirq vector %s: %w", SoftirqVectors[vec], err)
		}
	}
	return perVec, nil
}

// PutPolls counts polls of a device and context in a slot of its own, as
// a poll would claim one: how tests fill the histogram without traffic.
func (o *Objects) PutPolls(d reap.Device, ctx NapiNapiCtx, perCPU []NapiNapiVal) error {
	return o.hist.Put(NapiNapiKey{Netns: d.Netns, Ifindex: d.Ifindex, Context: uint32(ctx), InUse: 1}, perCPU)
}

// ClaimedSlots counts the histogram's claimed slots.
func (o *Objects) ClaimedSlots() (int, error) { return o.hist.Claimed() }
