package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"slices"
	"strconv"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/bpf/rxqobserve"
)

// rxqObserver is the rxq collector in observe mode: on every scrape it
// compares the XDP programs attached to the devices with the ones it
// watches, attaches an observer (rxqobserve) to each new one and closes
// the observer of each program that was replaced or detached, so that an
// observer never pins a dead program. It never attaches, detaches or
// replaces an XDP program.
type rxqObserver struct {
	cfg    RxqConfig
	logger *slog.Logger

	mu sync.Mutex
	// watching is the observer of each device's program, by attach mode.
	watching map[rxqAttachment]*rxqobserve.Observer
	// refused are the programs that cannot be observed, with the reason,
	// each logged once.
	refused map[rxqTarget]rxqobserve.Reason
	// retired holds, per device, the final counts of observers closed
	// since, so a device's counters go on across replacements.
	retired map[uint32]map[rxqCell]rxqobserve.Count
	// seen dates the queue x CPU x verdict cells.
	seen firstSeen
}

// rxqAttachment is one attach mode of one device.
type rxqAttachment struct {
	ifindex uint32
	mode    string
}

// rxqTarget is one program on one attachment.
type rxqTarget struct {
	rxqAttachment
	prog ebpf.ProgramID
}

// rxqCell is one counter cell of a device.
type rxqCell struct {
	queue, cpu int
	verdict    rxqobserve.ObserverVerdict
}

// reasonOffloaded: a program offloaded to the NIC runs on the NIC, where
// no trampoline reaches it.
const reasonOffloaded rxqobserve.Reason = "offloaded"

func newRxqObserver(cfg RxqConfig, logger *slog.Logger) (Collector, error) {
	// The observer reads struct xdp_buff through CO-RE relocations.
	if _, err := kernelBTF("rxq"); err != nil {
		return nil, err
	}
	return &rxqObserver{
		cfg: cfg, logger: logger,
		watching: map[rxqAttachment]*rxqobserve.Observer{},
		refused:  map[rxqTarget]rxqobserve.Reason{},
		retired:  map[uint32]map[rxqCell]rxqobserve.Count{},
	}, nil
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
	c.seen.sweep()
	return errors.Join(errs...)
}

func (c *rxqObserver) selects(dev Link) bool {
	return len(c.cfg.Devices) == 0 || slices.Contains(c.cfg.Devices, dev.Name)
}

// follow brings the observers in line with the programs attached now.
func (c *rxqObserver) follow(links *Links) error {
	attached := map[rxqAttachment]ebpf.ProgramID{}
	var errs []error
	for _, dev := range links.All() {
		if !c.selects(dev) {
			continue
		}
		for _, x := range dev.XDP {
			at := rxqAttachment{dev.Index, x.mode}
			attached[at] = x.progID
			if o := c.watching[at]; o != nil && o.Target() == x.progID {
				continue
			}
			errs = append(errs, c.retire(at))
			c.observe(dev, rxqTarget{at, x.progID})
		}
	}
	for at := range c.watching {
		if _, ok := attached[at]; !ok {
			errs = append(errs, c.retire(at))
		}
	}
	for t := range c.refused {
		if attached[t.rxqAttachment] != t.prog {
			delete(c.refused, t)
		}
	}
	// A device that is gone takes its counts along; a partial dump may
	// just have missed it.
	if !links.partial {
		for ifindex := range c.retired {
			if _, ok := links.Get(ifindex); !ok {
				delete(c.retired, ifindex)
			}
		}
	}
	return errors.Join(errs...)
}

// observe attaches an observer to t's program, or records why it cannot.
func (c *rxqObserver) observe(dev Link, t rxqTarget) {
	if _, ok := c.refused[t]; ok {
		return
	}
	if t.mode == "offload" {
		c.refuse(dev, t, reasonOffloaded, errors.New("the program runs on the NIC"))
		return
	}
	prog, err := ebpf.NewProgramFromID(t.prog)
	if errors.Is(err, os.ErrNotExist) {
		return // replaced since the dump; the next scrape sees its successor
	}
	if err != nil {
		c.refuse(dev, t, rxqobserve.Unobservable(err), bpfDenied("rxq", needsAdmin, err))
		return
	}
	defer prog.Close() // the observer's link holds its own reference
	queues := min(max(int(dev.RxQueues), 1), maxRxqQueues)
	o, err := rxqobserve.New(prog, int(dev.Index), queues)
	if err != nil {
		c.refuse(dev, t, rxqobserve.Unobservable(err), bpfDenied("rxq", needsBPF, err))
		return
	}
	c.watching[t.rxqAttachment] = o
}

func (c *rxqObserver) refuse(dev Link, t rxqTarget, reason rxqobserve.Reason, err error) {
	c.refused[t] = reason
	c.logger.Info("XDP program cannot be observed; it is reported in xdp_rxq_unobservable_info",
		"device", dev.Label, "mode", t.mode, "prog_id", t.prog, "reason", reason, "err", err)
}

// retire closes the observer of at, keeping its last counts.
func (c *rxqObserver) retire(at rxqAttachment) error {
	o := c.watching[at]
	if o == nil {
		return nil
	}
	delete(c.watching, at)
	counts, err := o.Read()
	cells := c.retired[at.ifindex]
	if cells == nil {
		cells = map[rxqCell]rxqobserve.Count{}
		c.retired[at.ifindex] = cells
	}
	addCounts(cells, counts)
	return errors.Join(err, o.Close())
}

func addCounts(cells map[rxqCell]rxqobserve.Count, counts []rxqobserve.Count) {
	for _, n := range counts {
		k := rxqCell{n.Queue, n.CPU, n.Verdict}
		sum := cells[k]
		sum.Queue, sum.CPU, sum.Verdict = n.Queue, n.CPU, n.Verdict
		sum.Packets += n.Packets
		sum.Bytes += n.Bytes
		cells[k] = sum
	}
}

// send emits one device's counts (retired plus live), its observed
// programs and the ones it cannot observe.
func (c *rxqObserver) send(ch chan<- prometheus.Metric, dev Link) error {
	fams := c.cfg.Families
	cells := map[rxqCell]rxqobserve.Count{}
	addCounts(cells, slices.Collect(maps.Values(c.retired[dev.Index])))
	var errs []error
	watched := false
	for _, x := range dev.XDP {
		at := rxqAttachment{dev.Index, x.mode}
		if o := c.watching[at]; o != nil {
			watched = true
			counts, err := o.Read()
			errs = append(errs, err)
			addCounts(cells, counts)
			fams.send(ch, rxqObserved, 1, dev.Label, x.mode, progIDLabel(o.Target()))
		}
		if reason, ok := c.refused[rxqTarget{at, x.progID}]; ok {
			fams.send(ch, rxqUnobservable, 1, dev.Label, x.mode, progIDLabel(x.progID), string(reason))
		}
	}
	var outOfRange uint64
	for _, n := range cells {
		if n.Queue == rxqobserve.QueueOutOfRange {
			outOfRange += n.Packets
			continue
		}
		queue, cpu, action := strconv.Itoa(n.Queue), strconv.Itoa(n.CPU), n.Verdict.String()
		fams.sendCreated(ch, rxqPackets, &c.seen, float64(n.Packets), dev.Label, queue, cpu, action)
		fams.sendCreated(ch, rxqBytes, &c.seen, float64(n.Bytes), dev.Label, queue, cpu, action)
	}
	if watched || len(cells) > 0 {
		fams.send(ch, rxqIssues, float64(outOfRange), dev.Label, "queue_out_of_range")
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("%s: %w", dev.Label, err)
	}
	return nil
}

func (c *rxqObserver) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	var errs []error
	for at, o := range c.watching {
		errs = append(errs, o.Close())
		delete(c.watching, at)
	}
	return errors.Join(errs...)
}
