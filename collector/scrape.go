package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/collector/internal/sharedrun"
)

var (
	scrapeDuration = newFamily("", "scrape_collector_duration_seconds",
		"Time a collector took during this scrape.", Gauge, "collector")
	scrapeSuccess = newFamily("", "scrape_collector_success",
		"1 if the collector's last scrape had no failure, 0 if it failed, timed out or could not start.", Gauge, "collector").documented("1 if the collector's last scrape had no failure, 0 if it failed, timed out or could not start (a missing capability, a refused program). What this host does not support is not a failure: see xdp_scrape_collector_unsupported.")
	scrapeSeries = newFamily("", "scrape_collector_series",
		"Series the collector sent in this scrape.", Gauge, "collector").documented("Series the collector sent in this scrape, a histogram counting one per bucket (with +Inf) plus _sum and _count: what the collector costs the Prometheus that stores it. Steer it with --collector.NAME.metrics-include/-exclude and device-include/-exclude.")
	scrapeUnsupported = newFamily("", "scrape_collector_unsupported",
		"1 if the collector, or part of it, cannot run because the kernel lacks what it reads, else 0.", Gauge, "collector").documented("1 if the collector, or part of it, cannot run because this host's kernel lacks the feature it reads (logged once at INFO at start-up), 0 otherwise.")
)

// Set runs a fixed set of collectors on each scrape, each in its own
// goroutine, and reports per-collector duration and success.
type Set struct {
	// UpdateFloor is how long a shared Update may run at least, whatever
	// the deadline of the scrape that starts it: the exporter's own scrape
	// timeout (--web.scrape-timeout), so that a scraper with a far shorter
	// timeout cannot doom the Update that a scrape arriving a moment later
	// joins. Zero: only the scrapes' deadlines count.
	UpdateFloor time.Duration

	collectors map[string]Collector
	logger     *slog.Logger
	// At most one Update per collector runs at a time: a scrape that
	// finds one in progress (a concurrent scrape, or one stuck in the
	// kernel, such as an ioctl waiting for RTNL) waits for its result
	// instead of starting another, so a stuck collector holds one
	// goroutine and one thread, not one per scrape.
	mu       sync.Mutex
	inflight map[string]*call
	// logged is, per collector, the failure last logged at ERROR: a
	// failure that repeats is logged at debug level until the collector
	// succeeds or fails otherwise.
	logged map[string]string
}

// call is one Update in progress, shared by the scrapes that arrive while
// it runs. Its context ends at the latest deadline of those scrapes, never
// at the deadline or the disconnect of the scrape that happened to start
// it: an HA pair of Prometheus servers with different scrape timeouts
// shares one Update, and the one with the longer timeout must get it
// whole.
type call = sharedrun.Run[prometheus.Metric, result]

// NewSet wraps the built collectors. The failure of a collector whose
// constructor failed (Unavailable) was logged by Build.
func NewSet(collectors map[string]Collector, logger *slog.Logger) *Set {
	s := &Set{collectors: collectors, logger: logger, inflight: map[string]*call{}, logged: map[string]string{}}
	for name, c := range collectors {
		if u, ok := c.(unavailable); ok {
			s.logged[name] = u.err.Error()
		}
	}
	return s
}

// update returns the Update of collector name in progress, starting one
// with links when there is none; either way ctx's deadline joins the
// Update's (sharedrun.Run.Join).
func (s *Set) update(ctx context.Context, links *LinkSnapshot, name string) *call {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.inflight[name]; c != nil {
		c.Join(ctx)
		return c
	}
	c := sharedrun.Start(ctx, s.UpdateFloor, func(ctx context.Context, add func(prometheus.Metric)) result {
		return run(ctx, links, s.collectors[name], add)
	}, func() {
		s.mu.Lock()
		delete(s.inflight, name)
		s.mu.Unlock()
	})
	s.inflight[name] = c
	return c
}

// Close closes every collector, returning all errors joined.
func (s *Set) Close() error {
	var errs []error
	for name, c := range s.collectors {
		if err := c.Close(); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
		}
	}
	return errors.Join(errs...)
}

// Scrape returns a prometheus.Collector that runs every collector once per
// Collect call and gives up on any collector still running when ctx ends.
// The HTTP handler builds one per request so that the request's deadline
// (Prometheus' X-Prometheus-Scrape-Timeout-Seconds) bounds the scrape.
func (s *Set) Scrape(ctx context.Context) prometheus.Collector {
	return s.scrapeOn(ctx, NewLinkSnapshot())
}

// scrapeOn is Scrape with the scrape's dump of the devices given.
func (s *Set) scrapeOn(ctx context.Context, links *LinkSnapshot) prometheus.Collector {
	return scrape{set: s, ctx: ctx, links: links}
}

type scrape struct {
	set   *Set
	ctx   context.Context
	links *LinkSnapshot
}

func (scrape) Describe(ch chan<- *prometheus.Desc) {
	ch <- scrapeDuration.Desc()
	ch <- scrapeSuccess.Desc()
	ch <- scrapeSeries.Desc()
	ch <- scrapeUnsupported.Desc()
}

type result struct {
	err      error
	duration time.Duration
}

func (sc scrape) Collect(ch chan<- prometheus.Metric) {
	names := make([]string, 0, len(sc.set.collectors))
	for name := range sc.set.collectors {
		names = append(names, name)
	}
	sort.Strings(names)

	// Each collector's metrics go to the registry as it sends them, so
	// the registry checks and sorts them while the slower collectors
	// still wait on the kernel.
	var wg sync.WaitGroup
	for _, name := range names {
		c := sc.set.update(sc.ctx, sc.links, name)
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc.forward(ch, name, c)
		}()
	}
	wg.Wait()
}

// forward sends the metrics of one Update until it ends or the scrape's
// deadline passes, then the collector's status. Nothing is sent after it
// returns, so a collector that outlives the scrape never writes into it.
func (sc scrape) forward(ch chan<- prometheus.Metric, name string, c *call) {
	series := 0
	send := func(batch []prometheus.Metric) {
		for _, m := range batch {
			series += seriesOf(m)
			ch <- m
		}
	}
	for sent := 0; ; {
		batch, wake := c.Next(sent)
		send(batch)
		sent += len(batch)
		if wake == nil {
			continue
		}
		select {
		case <-wake:
			continue
		case <-c.Done():
		case <-sc.ctx.Done():
		}
		// Once the deadline has passed both cases are ready for a
		// collector that did finish; select would pick at random and
		// report it as timed out half the time.
		select {
		case <-c.Done():
			batch, _ := c.Next(sent)
			send(batch)
			sc.report(ch, name, c.Result(), series)
		default:
			age := c.Age()
			sc.report(ch, name, result{err: fmt.Errorf("scrape deadline reached before the collector finished (its Update has run for %v): %w",
				age.Round(time.Millisecond), sc.ctx.Err()), duration: age}, series)
		}
		return
	}
}

// histogramDescs are the descriptors of the histogram families, whose
// samples are several series each.
var histogramDescs = sync.OnceValue(func() map[*prometheus.Desc]bool {
	out := map[*prometheus.Desc]bool{}
	for _, f := range Catalogue() {
		if f.Type == Histogram {
			out[f.Desc()] = true
		}
	}
	return out
})

// seriesOf is the number of series m becomes in the exposition: one, or
// for a histogram its buckets, +Inf when not among them, _sum and _count.
func seriesOf(m prometheus.Metric) int {
	if !histogramDescs()[m.Desc()] {
		return 1
	}
	var out dto.Metric
	if err := m.Write(&out); err != nil || out.Histogram == nil {
		return 1
	}
	n := len(out.Histogram.Bucket) + 2
	if b := out.Histogram.Bucket; len(b) == 0 || !math.IsInf(b[len(b)-1].GetUpperBound(), 1) {
		n++
	}
	return n
}

// run calls Update, handing each metric to add (which never blocks, so a
// collector that outlives its scrape cannot stall), and turns a panic into
// an error.
func run(ctx context.Context, links *LinkSnapshot, c Collector, add func(prometheus.Metric)) (r result) {
	start := time.Now()
	mch := make(chan prometheus.Metric, 64)
	done := make(chan struct{})
	go func() {
		for m := range mch {
			add(m)
		}
		close(done)
	}()
	func() {
		defer func() {
			if p := recover(); p != nil {
				r.err = fmt.Errorf("panic: %v", p)
			}
		}()
		r.err = c.Update(ctx, links, mch)
	}()
	close(mch)
	<-done
	r.duration = time.Since(start)
	return r
}

func (sc scrape) report(ch chan<- prometheus.Metric, name string, r result, series int) {
	success, unsupported := 1.0, 0.0
	if r.err != nil && errors.Is(r.err, errors.ErrUnsupported) {
		unsupported = 1
	}
	if r.err != nil && !unsupportedOnly(r.err) {
		success = 0
	}
	sc.set.log(name, r.err, success == 0)
	// A collector that fails part-way, or misses the deadline, keeps what
	// it sent (forward), as node_exporter does: success 0 says the set
	// may be incomplete.
	ch <- scrapeDuration.Must(r.duration.Seconds(), name)
	ch <- scrapeSuccess.Must(success, name)
	ch <- scrapeSeries.Must(float64(series), name)
	ch <- scrapeUnsupported.Must(unsupported, name)
}

// log logs a scrape's error of collector name: a failure at ERROR the
// first time it is seen, every repeat and what the host does not support
// (said at INFO when the collector was built) at debug level.
func (s *Set) log(name string, err error, failed bool) {
	s.mu.Lock()
	repeat := failed && s.logged[name] == err.Error()
	switch {
	case err == nil:
		delete(s.logged, name)
	case failed:
		s.logged[name] = err.Error()
	}
	s.mu.Unlock()
	if err == nil {
		return
	}
	level := slog.LevelDebug
	if failed && !repeat {
		level = slog.LevelError
	}
	s.logger.Log(context.Background(), level, "collector failed", "collector", name, "err", err)
}
