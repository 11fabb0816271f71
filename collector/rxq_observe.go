package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/bpf/rxqobserve"
	"github.com/xdp-exporter/xdp_exporter/bpf/tracing"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/created"
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
	// seen dates the queue x CPU x verdict cells.
	seen created.Tracker
}

func newRxqObserver(cfg RxqConfig, logger *slog.Logger) (Collector, error) {
	// The observer reads struct xdp_buff through CO-RE relocations.
	if _, err := tracing.KernelBTF(); err != nil {
		return nil, err
	}
	return &rxqObserver{cfg: cfg, logger: logger, tracker: rxqobserve.NewTracker()}, nil
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
	for _, r := range refusals {
		needs := needsBPF
		if errors.Is(r.Err, rxqobserve.ErrOpen) {
			needs = needsAdmin
		}
		c.logger.Info("XDP program cannot be observed; it is reported in xdp_rxq_unobservable_info",
			"device", labels[r.Ifindex], "mode", r.Mode, "prog_id", r.Prog, "reason", r.Reason, "err", bpfDenied("rxq", needs, r.Err))
	}
	return err
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
	if err != nil {
		return fmt.Errorf("%s: %w", dev.Label, err)
	}
	return nil
}

func (c *rxqObserver) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tracker.Close()
}
