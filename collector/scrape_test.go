package collector

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/procfs"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"golang.org/x/sys/unix"
)

// The fakes below test the framework, not a kernel source: they stand for
// a collector that hangs in an ioctl, one that panics, one that fails and
// one that works. Their descriptor is built directly, not with newFamily,
// so that it stays out of METRICS.md.
var fakeDesc = prometheus.NewDesc("xdp_test_fake_value", "Value of a fake collector.", []string{"name"}, nil)

type fake struct {
	name string
	// block, when set, makes Update wait for it to close, ignoring ctx as a
	// driver stuck in an ioctl would.
	block  <-chan struct{}
	panics bool
	err    error
}

func (f fake) Update(_ context.Context, _ *LinkSnapshot, ch chan<- prometheus.Metric) error {
	if f.block != nil {
		<-f.block
	}
	if f.panics {
		var m map[string]int
		m[f.name]++ // a nil-map write, as a real bug would panic
	}
	ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, f.name)
	return f.err
}

func (fake) Close() error { return nil }

// gatherSet gathers one scrape of set bounded by ctx, failing the test if
// the gather has not returned after a minute: that can only mean it waited
// for a collector that never finishes.
func gatherSet(t *testing.T, ctx context.Context, set *Set) exportertest.Families {
	t.Helper()
	type out struct {
		mfs []*dto.MetricFamily
		err error
	}
	done := make(chan out, 1)
	go func() {
		// As the HTTP handler does: the scrape describes only its own
		// families, so a pedantic registry would reject the rest.
		reg := prometheus.NewRegistry()
		reg.MustRegister(set.Scrape(ctx))
		mfs, err := reg.Gather()
		done <- out{mfs, err}
	}()
	var o out
	select {
	case o = <-done:
	case <-time.After(time.Minute):
		t.Fatal("the scrape waited for a hung collector")
	}
	if o.err != nil {
		t.Fatalf("gather: %v", o.err)
	}
	res := exportertest.Families{}
	for _, mf := range o.mfs {
		res[mf.GetName()] = mf
	}
	return res
}

// TestScrapeHungCollector: a collector that never returns is reported with
// success 0 once the scrape's deadline passes, and the others' metrics are
// served; the scrape does not wait for it.
func TestScrapeHungCollector(t *testing.T) {
	hang := make(chan struct{})
	defer close(hang)
	set := NewSet(map[string]Collector{
		"hung": fake{name: "hung", block: hang},
		"ok":   fake{name: "ok"},
	}, slog.New(slog.DiscardHandler))
	// Several rounds: "hung" sorts first, so the scrape reaches "ok" after
	// the deadline, when both its result and ctx.Done are ready; a select
	// that picks either at random would fail some rounds.
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		mfs := gatherSet(t, ctx, set)
		cancel()
		if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "hung"); got != 0 {
			t.Fatalf("round %d: hung collector: success %v, want 0", i, got)
		}
		// It ran for the whole 200 ms deadline; a cut-off collector once
		// reported 0 s here.
		if got := mfs.Value(t, "xdp_scrape_collector_duration_seconds", "collector", "hung"); got < 0.1 {
			t.Fatalf("round %d: hung collector: duration %v s, want the time it ran (about 0.2 s)", i, got)
		}
		if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "ok"); got != 1 {
			t.Fatalf("round %d: ok collector: success %v, want 1", i, got)
		}
		if got := mfs.Value(t, "xdp_test_fake_value", "name", "ok"); got != 1 {
			t.Fatalf("round %d: ok collector's metric: %v", i, got)
		}
		if len(mfs["xdp_test_fake_value"].GetMetric()) != 1 {
			t.Fatalf("round %d: the hung collector's metric was served: %v", i, mfs["xdp_test_fake_value"])
		}
	}
}

// TestScrapeLateCollector: a collector that finishes after the deadline
// cannot write into the finished scrape, and the next scrape works.
func TestScrapeLateCollector(t *testing.T) {
	release := make(chan struct{})
	set := NewSet(map[string]Collector{"slow": fake{name: "slow", block: release}}, slog.New(slog.DiscardHandler))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mfs := gatherSet(t, ctx, set)
	if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "slow"); got != 0 {
		t.Errorf("success %v, want 0", got)
	}
	close(release) // the stale Update now returns into its own buffer
	// A scrape that starts while it is still returning gets its (empty,
	// late) result; the first scrape after that works.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mfs = gatherSet(t, context.Background(), set)
		if mfs.Value(t, "xdp_scrape_collector_success", "collector", "slow") == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the collector never recovered after its stale Update returned")
		}
		time.Sleep(time.Millisecond)
	}
	if got := mfs.Value(t, "xdp_test_fake_value", "name", "slow"); got != 1 {
		t.Errorf("next scrape: metric %v, want 1", got)
	}
}

// TestScrapeBlockedCollectorBounded: a collector blocked inside Update for
// 100 scrapes runs one Update, not 100: each later scrape waits for it
// until its deadline and reports it with success 0, the goroutine and
// thread counts stay where they were, and the other collector keeps
// serving.
func TestScrapeBlockedCollectorBounded(t *testing.T) {
	block := make(chan struct{})
	var calls atomic.Int64
	set := NewSet(map[string]Collector{
		"blocked": counting{fake: fake{name: "blocked", block: block}, calls: &calls},
		"ok":      fake{name: "ok"},
	}, slog.New(slog.DiscardHandler))
	scrape := func() exportertest.Families {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond) // long enough for the ok collector on a loaded machine
		defer cancel()
		return gatherSet(t, ctx, set)
	}
	scrape() // the Update that blocks
	goroutines, threads := runtime.NumGoroutine(), osThreads(t)
	for i := 0; i < 100; i++ {
		mfs := scrape()
		if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "blocked"); got != 0 {
			t.Fatalf("scrape %d: blocked collector success %v, want 0", i, got)
		}
		if got := mfs.Value(t, "xdp_test_fake_value", "name", "ok"); got != 1 {
			t.Fatalf("scrape %d: the other collector stopped serving", i)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("%d Updates started for the blocked collector, want 1", n)
	}
	if g := runtime.NumGoroutine(); g > goroutines+5 {
		t.Errorf("goroutines grew from %d to %d over 100 scrapes", goroutines, g)
	}
	if n := osThreads(t); n > threads+2 {
		t.Errorf("OS threads grew from %d to %d over 100 scrapes", threads, n)
	}
	close(block)
}

// counting is a fake that counts its Update calls.
type counting struct {
	fake
	calls *atomic.Int64
}

func (c counting) Update(ctx context.Context, _ *LinkSnapshot, ch chan<- prometheus.Metric) error {
	c.calls.Add(1)
	return c.fake.Update(ctx, NewLinkSnapshot(), ch)
}

// osThreads is the process's thread count (/proc/self/stat, through
// prometheus/procfs).
func osThreads(t *testing.T) int {
	t.Helper()
	p, err := procfs.Self()
	if err != nil {
		t.Fatal(err)
	}
	st, err := p.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.NumThreads
}

// TestScrapePanickingCollector: a panic in one collector is success 0 for it
// and nothing else changes.
func TestScrapePanickingCollector(t *testing.T) {
	set := NewSet(map[string]Collector{
		"boom":  fake{name: "boom", panics: true},
		"fails": fake{name: "fails", err: errors.New("EIO")},
		"ok":    fake{name: "ok"},
	}, slog.New(slog.DiscardHandler))
	for i := 0; i < 2; i++ { // the process survives and the next scrape is the same
		mfs := gatherSet(t, context.Background(), set)
		for name, want := range map[string]float64{"boom": 0, "fails": 0, "ok": 1} {
			if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", name); got != want {
				t.Errorf("%s: success %v, want %v", name, got, want)
			}
		}
		// A failing collector keeps its partial metrics; a panicking one
		// emitted nothing before the panic.
		if got := mfs.Value(t, "xdp_test_fake_value", "name", "fails"); got != 1 {
			t.Errorf("fails: partial metric %v", got)
		}
		if n := len(mfs["xdp_test_fake_value"].GetMetric()); n != 2 {
			t.Errorf("%d fake samples, want 2 (ok, fails)", n)
		}
	}
}

// sendsThenBlocks sends one metric and then hangs, as a collector stuck
// on its second device would.
type sendsThenBlocks struct{ release <-chan struct{} }

func (s sendsThenBlocks) Update(_ context.Context, _ *LinkSnapshot, ch chan<- prometheus.Metric) error {
	ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, "partial")
	<-s.release
	return nil
}

func (sendsThenBlocks) Close() error { return nil }

// TestScrapeStreamsPartial: what a collector sent before the deadline is
// served, with success 0 saying the set is incomplete; nothing it sends
// afterwards reaches the finished scrape, and a scrape that joins the
// same Update later gets everything it sent from the start.
func TestScrapeStreamsPartial(t *testing.T) {
	release := make(chan struct{})
	set := NewSet(map[string]Collector{"stuck": sendsThenBlocks{release: release}}, slog.New(slog.DiscardHandler))
	for range 2 {
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		mfs := gatherSet(t, ctx, set)
		cancel()
		if got := mfs.Value(t, "xdp_test_fake_value", "name", "partial"); got != 1 {
			t.Errorf("the metric sent before the deadline: %v, want 1", got)
		}
		if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "stuck"); got != 0 {
			t.Errorf("success %v, want 0", got)
		}
	}
	close(release)
}

// slowUntil sends its metric after d, or gives up with the context's
// error when its Update's context ends first; started is closed when an
// Update begins.
type slowUntil struct {
	d       time.Duration
	started chan struct{}
	once    *sync.Once
}

func (s slowUntil) Update(ctx context.Context, _ *LinkSnapshot, ch chan<- prometheus.Metric) error {
	s.once.Do(func() { close(s.started) })
	select {
	case <-time.After(s.d):
		ch <- prometheus.MustNewConstMetric(fakeDesc, prometheus.GaugeValue, 1, "slow")
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (slowUntil) Close() error { return nil }

// TestJoinedScrapesOwnDeadlines: three scrapes share one Update. The one
// that starts it has a 4 ms deadline, another client disconnects after
// 2 ms, and the third has the default 10 s: the Update runs on past the
// Set's 50 ms floor until the latest deadline, so the third gets every
// metric and success 1, while the short one reports its own deadline.
func TestJoinedScrapesOwnDeadlines(t *testing.T) {
	c := slowUntil{d: 200 * time.Millisecond, started: make(chan struct{}), once: new(sync.Once)}
	set := NewSet(map[string]Collector{"slow": c}, slog.New(slog.DiscardHandler))
	set.UpdateFloor = 50 * time.Millisecond
	short, cancelShort := context.WithTimeout(context.Background(), 4*time.Millisecond)
	defer cancelShort()
	shortDone := make(chan exportertest.Families, 1)
	go func() { shortDone <- gatherSet(t, short, set) }()
	<-c.started

	gone, hangUp := context.WithTimeout(context.Background(), 10*time.Second)
	goneDone := make(chan struct{})
	go func() {
		defer close(goneDone)
		gatherSet(t, gone, set)
	}()
	time.AfterFunc(2*time.Millisecond, hangUp)

	long, cancelLong := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancelLong()
	mfs := gatherSet(t, long, set)
	if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "slow"); got != 1 {
		t.Errorf("the 10 s scrape: success %v, want 1: another scrape's deadline or disconnect cut its Update short", got)
	}
	if got := mfs.Value(t, "xdp_test_fake_value", "name", "slow"); got != 1 {
		t.Errorf("the 10 s scrape: the collector's metric %v, want 1", got)
	}
	if got := (<-shortDone).Value(t, "xdp_scrape_collector_success", "collector", "slow"); got != 0 {
		t.Errorf("the 4 ms scrape: success %v, want 0 (its own deadline passed)", got)
	}
	<-goneDone
}

// TestScrapeUnsupportedOrFailed: what the host lacks (errors.ErrUnsupported,
// however wrapped) is success 1 and unsupported 1; a failure joined to it
// is success 0, whichever way the errors are put together.
func TestScrapeUnsupportedOrFailed(t *testing.T) {
	lacks := fmt.Errorf("%w: the kernel has no tracepoint xdp:x", errors.ErrUnsupported)
	refused := errors.New("tracepoints not attached: xdp:y")
	for _, tc := range []struct {
		name                 string
		err                  error
		success, unsupported float64
	}{
		{"nil", nil, 1, 0},
		{"unsupported", lacks, 1, 1},
		{"wrapped", fmt.Errorf("collector: %w", fmt.Errorf("%w (cause: %v)", lacks, unix.ENOENT)), 1, 1},
		{"joined unsupported", errors.Join(lacks, fmt.Errorf("%w: also", errors.ErrUnsupported)), 1, 1},
		{"joined with a failure", errors.Join(lacks, refused), 0, 1},
		{"wrapped join with a failure", fmt.Errorf("reading: %w", errors.Join(refused, lacks)), 0, 1},
		{"two %w, one a failure", fmt.Errorf("%w: %w", lacks, unix.ENOENT), 0, 1},
		{"failure", refused, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			set := NewSet(map[string]Collector{"c": fake{name: "c", err: tc.err}}, slog.New(slog.DiscardHandler))
			mfs := gatherSet(t, context.Background(), set)
			if got := mfs.Value(t, "xdp_scrape_collector_success", "collector", "c"); got != tc.success {
				t.Errorf("success %v, want %v", got, tc.success)
			}
			if got := mfs.Value(t, "xdp_scrape_collector_unsupported", "collector", "c"); got != tc.unsupported {
				t.Errorf("unsupported %v, want %v", got, tc.unsupported)
			}
		})
	}
}

// flaky fails with the error it holds at each Update.
type flaky struct{ err *error }

func (f flaky) Update(context.Context, *LinkSnapshot, chan<- prometheus.Metric) error { return *f.err }
func (flaky) Close() error                                                            { return nil }

// TestScrapeLogsFailureOnce: a failure is logged at ERROR when it first
// appears and at debug while it repeats; after a success, or with another
// error, it is logged at ERROR again. A collector whose constructor
// failed was logged by Build: its scrapes log at debug.
func TestScrapeLogsFailureOnce(t *testing.T) {
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var err error
	built := errors.New("loading the program: permission denied")
	set := NewSet(map[string]Collector{"c": flaky{&err}, "dead": Unavailable(built)}, logger)
	a, b := errors.New("ETHTOOL_GSTATS: input/output error"), errors.New("ETHTOOL_GSTATS: no buffer space")
	for _, e := range []error{a, a, a, nil, a, b, b} {
		err = e
		gatherSet(t, context.Background(), set)
	}
	errorsOf := func(collector string) (n int) {
		for _, line := range strings.Split(logs.String(), "\n") {
			if strings.Contains(line, "level=ERROR") && strings.Contains(line, "collector="+collector+" ") {
				n++
			}
		}
		return n
	}
	if n := errorsOf("c"); n != 3 {
		t.Errorf("%d ERROR lines for c, want 3 (a, a after the success, b):\n%s", n, logs.String())
	}
	if n := errorsOf("dead"); n != 0 {
		t.Errorf("%d ERROR lines at scrape time for a collector Build reported:\n%s", n, logs.String())
	}
	if n := strings.Count(logs.String(), "level=DEBUG"); n != 3+7 {
		t.Errorf("%d DEBUG lines, want 10 (three repeats of c, all seven of dead):\n%s", n, logs.String())
	}
}
