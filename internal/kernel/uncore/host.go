package uncore

import (
	"cmp"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/perfevent"
)

// Stack is one IIO stack (a PCIe root complex) on one die.
type Stack struct {
	Socket  int
	IIO     int    // the box: uncore_iio_<IIO>
	RootBus string // "0000:3a"; empty where the kernel gives no die<N> mapping
}

// DDIOCount is the socket's CHA TOR inserts of one request type that hit
// or missed the LLC, summed over its CHA boxes and corrected for
// multiplexing.
type DDIOCount struct {
	Socket          int
	Request, Result string
	Requests        float64
}

// IIOCount is one of perf iostat's figures of a stack, in bytes.
type IIOCount struct {
	Stack
	Direction, Op string
	Bytes         float64
}

// FreeRunningCount is a free-running bandwidth counter of one port of a
// stack, in bytes: in is what the port sent to the CPU, out what it
// received.
type FreeRunningCount struct {
	Stack
	Port, Direction string
	Bytes           float64
}

// Time is how long a socket's groups of one kind were enabled and how
// long they counted, summed over the boxes; running below enabled means
// the kernel multiplexed them and the counts are scaled estimates.
type Time struct {
	Socket           int
	PMU, Group       string
	Enabled, Running float64 // seconds
}

// Reading is one read of every open counter, and which events are
// available (as Available says).
type Reading struct {
	DDIO        []DDIOCount
	IIO         []IIOCount
	FreeRunning []FreeRunningCount
	Times       []Time
	Available   map[string]bool
}

// ErrNoEvents is returned by Open where the host has uncore PMUs but
// nothing this package can count on them: a model not in its table and
// no free-running IIO counters.
var ErrNoEvents = fmt.Errorf("%w: no uncore event to count", errors.ErrUnsupported)

// Host holds the uncore counters open on this host: opened once, read at
// every scrape, nothing on the packet path.
type Host struct {
	mu        sync.Mutex
	counters  []*counter
	stacks    []Stack
	available map[string]bool
}

type counter struct {
	group  *perfevent.Group
	scaler perfevent.Scaler
	socket int
	pmu    string // cha, iio; empty for the free-running counters, which never multiplex
	name   string
	emit   func(r *accumulator, vals []float64)
}

// Group is one event group Plan lays out: events counted together on
// one box, opened on one of its CPUs.
type Group struct {
	PMU     string
	CPU     int
	Names   []string // what Available reports them as
	Events  []perfevent.Event
	counter *counter
}

// Plan discovers the uncore PMUs under sys and lays out, on each box's
// CPUs, the model's DDIO and IIO groups and the free-running IIO
// bandwidth counters the kernel names; model may be nil, for the
// free-running counters alone. It opens nothing.
func Plan(sys string, model *Model) ([]*Group, []Stack, error) {
	pmus, err := Discover(sys)
	if err != nil {
		return nil, nil, err
	}
	o := planner{sys: sys, model: model, buses: map[int]map[int]string{}}
	if model != nil {
		if o.terms, err = model.Terms(); err != nil {
			return nil, nil, err
		}
	}
	for _, p := range pmus {
		if p.Kind == KindIIO {
			if o.buses[p.Box], err = p.RootBuses(); err != nil {
				return nil, nil, err
			}
		}
	}
	for _, p := range pmus {
		if err := o.plan(p); err != nil {
			return nil, nil, err
		}
	}
	return o.groups, o.stacks, nil
}

// Open opens what Plan lays out. A group a box refuses as unknown is
// left out (Available says which); a refusal for lack of permission
// fails the whole.
func Open(sys string, model *Model) (*Host, error) {
	groups, stacks, err := Plan(sys, model)
	if err != nil {
		return nil, err
	}
	h := &Host{stacks: stacks, available: map[string]bool{}}
	for _, g := range groups {
		pg, err := perfevent.Open(g.counter.name, g.Events, g.CPU)
		for _, n := range g.Names {
			if prev, seen := h.available[n]; !seen || prev {
				h.available[n] = err == nil
			}
		}
		if perfevent.IsUnsupported(err) {
			continue
		}
		if err != nil {
			h.Close()
			return nil, err
		}
		g.counter.group = pg
		h.counters = append(h.counters, g.counter)
	}
	if len(h.counters) == 0 {
		if model == nil {
			return nil, fmt.Errorf("%w: the CPU model is not in the event table and the kernel names no free-running IIO counter", ErrNoEvents)
		}
		return nil, fmt.Errorf("%w: every %s event was refused", ErrNoEvents, model.Name)
	}
	return h, nil
}

type planner struct {
	sys    string
	model  *Model
	terms  map[string]string      // the model's event strings by name
	buses  map[int]map[int]string // IIO box -> logical die -> root bus
	groups []*Group
	stacks []Stack
}

func (o *planner) plan(p *PMU) error {
	dies, err := dieOrder(o.sys, p.CPUs)
	if err != nil {
		return err
	}
	for i, cpu := range p.CPUs {
		socket := dies[i].socket
		stack := Stack{Socket: socket, IIO: p.Box, RootBus: o.buses[p.Box][dies[i].index]}
		switch {
		case p.Kind == KindCHA && o.model != nil:
			err = o.planDDIO(p, cpu, socket)
		case p.Kind == KindIIO && o.model != nil:
			err = o.planIIO(p, cpu, stack)
		case p.Kind == KindFreeRunning:
			err = o.planFreeRunning(p, cpu, stack)
		}
		if err != nil {
			return err
		}
		if p.Kind == KindIIO {
			o.stacks = append(o.stacks, stack)
		}
	}
	return nil
}

func (o *planner) add(p *PMU, cpu int, c *counter, names []string, events []perfevent.Event) {
	o.groups = append(o.groups, &Group{PMU: p.Name, CPU: cpu, Names: names, Events: events, counter: c})
}

// events encodes the named events of the model on p, in order.
func (o *planner) events(p *PMU, names []string) ([]perfevent.Event, error) {
	out := make([]perfevent.Event, len(names))
	for i, name := range names {
		a, err := p.Encode(o.terms[name])
		if err != nil {
			return nil, err
		}
		out[i] = perfEvent(name, a)
	}
	return out, nil
}

func perfEvent(name string, a Attr) perfevent.Event {
	return perfevent.Event{Name: name, Type: a.Type, Config: a.Config, Config1: a.Config1}
}

func (o *planner) planDDIO(p *PMU, cpu, socket int) error {
	for _, req := range o.model.DDIO {
		var names, results []string
		for _, ev := range []struct{ name, result string }{{req.Hit, "hit"}, {req.Miss, "miss"}} {
			if ev.name != "" {
				names, results = append(names, ev.name), append(results, ev.result)
			}
		}
		events, err := o.events(p, names)
		if err != nil {
			return err
		}
		c := &counter{socket: socket, pmu: KindCHA, name: req.Request, emit: func(a *accumulator, vals []float64) {
			for i, v := range vals {
				a.ddio[ddioKey{socket, req.Request, results[i]}] += v
			}
		}}
		o.add(p, cpu, c, names, events)
	}
	return nil
}

// planIIO lays out the stack's traffic events as two pairs, inbound and
// outbound: the IIO boxes count the device-initiated events (0x83) on
// counters 0-1 and the CPU-initiated ones (0xc0) on 2-3, so each pair
// fits whatever the other holds.
func (o *planner) planIIO(p *PMU, cpu int, stack Stack) error {
	for _, dir := range []string{"inbound", "outbound"} {
		var names, ops []string
		for _, t := range IIOTraffics {
			if t.Direction == dir {
				names, ops = append(names, t.Event), append(ops, t.Op)
			}
		}
		events, err := o.events(p, names)
		if err != nil {
			return err
		}
		c := &counter{socket: stack.Socket, pmu: KindIIO, name: dir, emit: func(a *accumulator, vals []float64) {
			for i, v := range vals {
				a.r.IIO = append(a.r.IIO, IIOCount{Stack: stack, Direction: dir, Op: ops[i], Bytes: v * IIOWordBytes})
			}
		}}
		o.add(p, cpu, c, names, events)
	}
	return nil
}

var bandwidthEvent = regexp.MustCompile(`^bw_(in|out)_port([0-9]+)$`)

// unitBytes converts the .unit the kernel gives the free-running
// bandwidth counters (MiB) to bytes.
var unitBytes = map[string]float64{"": 1, "B": 1, "Bytes": 1, "KiB": 1 << 10, "MiB": 1 << 20, "GiB": 1 << 30}

func (o *planner) planFreeRunning(p *PMU, cpu int, stack Stack) error {
	named, err := p.NamedEvents("bw_")
	if err != nil {
		return err
	}
	for _, ne := range named {
		m := bandwidthEvent.FindStringSubmatch(ne.Name)
		unit, known := unitBytes[ne.Unit]
		if m == nil || !known {
			continue
		}
		scale := ne.Scale * unit
		port, dir := m[2], m[1]
		c := &counter{socket: stack.Socket, name: ne.Name, emit: func(a *accumulator, vals []float64) {
			a.r.FreeRunning = append(a.r.FreeRunning, FreeRunningCount{Stack: stack, Port: port, Direction: dir, Bytes: vals[0] * scale})
		}}
		o.add(p, cpu, c, []string{KindFreeRunning}, []perfevent.Event{perfEvent(p.Name+"/"+ne.Name, ne.Attr)})
	}
	return nil
}

type die struct{ socket, index int }

// dieOrder finds each cpumask CPU's socket and the logical die number
// the kernel's die<N> files use: the kernel numbers dies in the order of
// their (package, die) ids, and a box's cpumask holds one CPU per die.
func dieOrder(sys string, cpus []int) ([]die, error) {
	type id struct{ pkg, die int }
	ids := make([]id, len(cpus))
	for i, cpu := range cpus {
		topo := filepath.Join(sys, "devices", "system", "cpu", "cpu"+strconv.Itoa(cpu), "topology")
		s, err := readTrimmed(filepath.Join(topo, "physical_package_id"))
		if err != nil {
			return nil, err
		}
		if ids[i].pkg, err = strconv.Atoi(s); err != nil {
			return nil, fmt.Errorf("cpu%d physical_package_id %q: %w", cpu, s, err)
		}
		// die_id is Linux 5.2+; without it each package is one die.
		if s, err := readTrimmed(filepath.Join(topo, "die_id")); err == nil {
			ids[i].die, _ = strconv.Atoi(s)
		}
	}
	sorted := slices.Clone(ids)
	slices.SortFunc(sorted, func(a, b id) int { return cmp.Or(a.pkg-b.pkg, a.die-b.die) })
	out := make([]die, len(cpus))
	for i, d := range ids {
		out[i] = die{socket: d.pkg, index: slices.Index(sorted, d)}
	}
	return out, nil
}

// StacksOf lists the IIO stacks a network device's PCI function is
// behind: those whose root bus is the device's. None for a device
// without a PCI function, or where the kernel gives no die<N> mapping.
func (h *Host) StacksOf(sys, device string) []Stack {
	bus, err := pci.RootBus(sys, device)
	var out []Stack
	for _, s := range h.stacks {
		if err == nil && s.RootBus == bus {
			out = append(out, s)
		}
	}
	return out
}

// Available says, per event (perf's JSON name; iio_free_running for the
// free-running counters), whether every box it was tried on opened it.
func (h *Host) Available() map[string]bool { return h.available }

// Unavailable lists the events some box refused, sorted.
func (h *Host) Unavailable() []string {
	var out []string
	for ev, ok := range h.available {
		if !ok {
			out = append(out, ev)
		}
	}
	slices.Sort(out)
	return out
}
