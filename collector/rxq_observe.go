package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/bpf/rxqobserve"
	"github.com/xdp-exporter/xdp_exporter/bpf/tracing"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/created"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xdpdispatch"
)

// rxqObserver is the rxq collector in observe mode: on every scrape it
// brings its tracker (rxqobserve.Tracker) in line with the XDP programs
// attached to the devices, which observes each new program and lets go of
// replaced ones. It never attaches, detaches or replaces an XDP program.
type rxqObserver struct {
	cfg    RxqConfig
	logger *slog.Logger

	mu      sync.Mutex
	tracker *rxqobserve.Tracker
	// components are the observers of the programs inside libxdp's
	// dispatchers, one tracker each: a component keeps its program id
	// when libxdp rebuilds the dispatcher around it, and its counts go
	// with it when it is removed.
	components map[componentKey]*component
	// plain are the attached programs known not to be dispatchers: a
	// program's name never changes, so each is opened and asked once, not
	// at every scrape.
	plain map[ebpf.ProgramID]bool
	// seen dates the queue x CPU x verdict cells.
	seen created.Tracker
}

// componentKey is one component program of the dispatcher at one
// attachment.
type componentKey struct {
	rxqobserve.Attachment
	prog ebpf.ProgramID
}

type component struct {
	tracker *rxqobserve.Tracker
	name    string
}

func newRxqObserver(cfg RxqConfig, logger *slog.Logger) (Collector, error) {
	// The observer reads struct xdp_buff through CO-RE relocations.
	if _, err := tracing.KernelBTF(); err != nil {
		return nil, err
	}
	return &rxqObserver{cfg: cfg, logger: logger, tracker: rxqobserve.NewTracker(), components: map[componentKey]*component{}, plain: map[ebpf.ProgramID]bool{}}, nil
}

func (c *rxqObserver) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	links, err := snap.Get()
	if links == nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := []error{err, c.follow(links)}
	for _, dev := range links.All() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if c.selects(dev) {
			errs = append(errs, c.send(ch, dev))
		}
	}
	c.seen.Sweep()
	return errors.Join(errs...)
}

func (c *rxqObserver) selects(dev Link) bool {
	return len(c.cfg.Devices) == 0 || slices.Contains(c.cfg.Devices, dev.Name)
}

// follow brings the tracker in line with the programs attached now, and
// logs each program newly found unobservable, once.
func (c *rxqObserver) follow(links *Links) error {
	var targets []rxqobserve.Target
	labels := map[uint32]string{}
	for _, dev := range links.All() {
		if !c.selects(dev) {
			continue
		}
		labels[dev.Index] = dev.Label
		for _, x := range dev.XDP {
			targets = append(targets, rxqobserve.Target{Attachment: rxqobserve.Attachment{Ifindex: dev.Index, Mode: x.mode},
				Prog: x.progID, Queues: min(max(int(dev.RxQueues), 1), maxRxqQueues)})
		}
	}
	// A device that is gone takes its counts along; a partial dump may
	// just have missed it.
	present := func(ifindex uint32) bool { _, ok := links.Get(ifindex); return ok }
	if links.partial {
		present = nil
	}
	refusals, err := c.tracker.Follow(targets, present)
	more, cerr := c.followComponents(targets)
	err = errors.Join(err, cerr)
	for _, r := range append(refusals, more...) {
		needs := needsBPF
		if errors.Is(r.Err, rxqobserve.ErrOpen) {
			needs = needsAdmin
		}
		c.logger.Info("XDP program cannot be observed; it is reported in xdp_rxq_unobservable_info",
			"device", labels[r.Ifindex], "mode", r.Mode, "prog_id", r.Prog, "reason", r.Reason, "err", bpfDenied("rxq", needs, r.Err))
	}
	return err
}

// followComponents observes each component of the dispatchers among
// targets and closes the observers of components no longer in one, so
// that no link is left on a removed program.
func (c *rxqObserver) followComponents(targets []rxqobserve.Target) ([]rxqobserve.Refusal, error) {
	now := map[componentKey]bool{}
	plain := map[ebpf.ProgramID]bool{}
	var refusals []rxqobserve.Refusal
	var errs []error
	for _, tg := range targets {
		if tg.Mode == "offload" {
			continue
		}
		if c.plain[tg.Prog] {
			plain[tg.Prog] = true
			continue
		}
		d, err := readDispatcher(tg.Prog, tg.Ifindex, c.cfg.SysFS)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if d == nil {
			plain[tg.Prog] = true
			continue
		}
		for _, comp := range d.Components {
			k := componentKey{tg.Attachment, comp.Prog}
			now[k] = true
			if c.components[k] != nil {
				continue
			}
			name := ""
			if p, err := ebpf.NewProgramFromID(comp.Prog); err == nil {
				if info, err := p.Info(); err == nil {
					name = info.Name
				}
				p.Close()
			}
			t := rxqobserve.NewTracker()
			r, err := t.Follow([]rxqobserve.Target{{Attachment: tg.Attachment, Prog: comp.Prog, Queues: tg.Queues}}, nil)
			refusals, errs = append(refusals, r...), append(errs, err)
			c.components[k] = &component{tracker: t, name: name}
		}
	}
	for k, comp := range c.components {
		if !now[k] {
			errs = append(errs, comp.tracker.Close())
			delete(c.components, k)
		}
	}
	c.plain = plain
	return refusals, errors.Join(errs...)
}

// readDispatcher reads the dispatcher with id prog on ifindex, nil when
// the program is none or is gone.
func readDispatcher(prog ebpf.ProgramID, ifindex uint32, sysfs string) (*xdpdispatch.Dispatcher, error) {
	p, err := ebpf.NewProgramFromID(prog)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("XDP program %d: %w", prog, bpfDenied("rxq", needsAdmin, err))
	}
	defer p.Close()
	return xdpdispatch.Read(p, ifindex, filepath.Join(sysRoot(sysfs), "fs/bpf"))
}

// send emits one device's counts (retired plus live), its observed
// programs and the ones it cannot observe.
func (c *rxqObserver) send(ch chan<- prometheus.Metric, dev Link) error {
	fams := c.cfg.Families
	progs := map[string]ebpf.ProgramID{}
	for _, x := range dev.XDP {
		progs[x.mode] = x.progID
	}
	d, err := c.tracker.Read(dev.Index, progs)
	for mode, prog := range d.Observed {
		fams.send(ch, rxqObserved, 1, dev.Label, mode, progIDLabel(prog))
	}
	for mode, reason := range d.Unobservable {
		fams.send(ch, rxqUnobservable, 1, dev.Label, mode, progIDLabel(progs[mode]), string(reason))
	}
	var outOfRange uint64
	for _, n := range d.Counts {
		if n.Queue == rxqobserve.QueueOutOfRange {
			outOfRange += n.Packets
			continue
		}
		queue, cpu, action := strconv.Itoa(n.Queue), strconv.Itoa(n.CPU), n.Verdict.String()
		fams.sendCreated(ch, rxqPackets, &c.seen, float64(n.Packets), dev.Label, queue, cpu, action)
		fams.sendCreated(ch, rxqBytes, &c.seen, float64(n.Bytes), dev.Label, queue, cpu, action)
	}
	if len(d.Observed) > 0 || len(d.Counts) > 0 {
		fams.send(ch, rxqIssues, float64(outOfRange), dev.Label, "queue_out_of_range")
	}
	var errs []error
	for k, comp := range c.components {
		if k.Ifindex != dev.Index {
			continue
		}
		cd, err := comp.tracker.Read(dev.Index, map[string]ebpf.ProgramID{k.Mode: k.prog})
		errs = append(errs, err)
		if reason, ok := cd.Unobservable[k.Mode]; ok {
			fams.send(ch, rxqUnobservable, 1, dev.Label, k.Mode, progIDLabel(k.prog), string(reason))
		}
		for _, n := range cd.Counts {
			if n.Queue == rxqobserve.QueueOutOfRange {
				continue
			}
			labels := []string{dev.Label, strconv.Itoa(n.Queue), strconv.Itoa(n.CPU), n.Verdict.String(), progIDLabel(k.prog), comp.name}
			fams.sendCreated(ch, rxqComponentPackets, &c.seen, float64(n.Packets), labels...)
			fams.sendCreated(ch, rxqComponentBytes, &c.seen, float64(n.Bytes), labels...)
		}
	}
	err = errors.Join(append(errs, err)...)
	if err != nil {
		return fmt.Errorf("%s: %w", dev.Label, err)
	}
	return nil
}

func (c *rxqObserver) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	errs := []error{c.tracker.Close()}
	for k, comp := range c.components {
		errs = append(errs, comp.tracker.Close())
		delete(c.components, k)
	}
	return errors.Join(errs...)
}
