package collector

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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

func (f fake) Update(_ context.Context, ch chan<- prometheus.Metric) error {
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
func gatherSet(t *testing.T, ctx context.Context, set *Set) map[string]*dto.MetricFamily {
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
	res := map[string]*dto.MetricFamily{}
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
	}, discardLogger())
	// Several rounds: "hung" sorts first, so the scrape reaches "ok" after
	// the deadline, when both its result and ctx.Done are ready; a select
	// that picks either at random would fail some rounds.
	for i := 0; i < 10; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		mfs := gatherSet(t, ctx, set)
		cancel()
		if got := value(t, mfs, "xdp_scrape_collector_success", "collector", "hung"); got != 0 {
			t.Fatalf("round %d: hung collector: success %v, want 0", i, got)
		}
		if got := value(t, mfs, "xdp_scrape_collector_success", "collector", "ok"); got != 1 {
			t.Fatalf("round %d: ok collector: success %v, want 1", i, got)
		}
		if got := value(t, mfs, "xdp_test_fake_value", "name", "ok"); got != 1 {
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
	set := NewSet(map[string]Collector{"slow": fake{name: "slow", block: release}}, discardLogger())
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	mfs := gatherSet(t, ctx, set)
	if got := value(t, mfs, "xdp_scrape_collector_success", "collector", "slow"); got != 0 {
		t.Errorf("success %v, want 0", got)
	}
	close(release) // the stale Update now returns into its own buffer
	mfs = gatherSet(t, context.Background(), set)
	if got := value(t, mfs, "xdp_scrape_collector_success", "collector", "slow"); got != 1 {
		t.Errorf("next scrape: success %v, want 1", got)
	}
}

// TestScrapePanickingCollector: a panic in one collector is success 0 for it
// and nothing else changes.
func TestScrapePanickingCollector(t *testing.T) {
	set := NewSet(map[string]Collector{
		"boom":  fake{name: "boom", panics: true},
		"fails": fake{name: "fails", err: errors.New("EIO")},
		"ok":    fake{name: "ok"},
	}, discardLogger())
	for i := 0; i < 2; i++ { // the process survives and the next scrape is the same
		mfs := gatherSet(t, context.Background(), set)
		for name, want := range map[string]float64{"boom": 0, "fails": 0, "ok": 1} {
			if got := value(t, mfs, "xdp_scrape_collector_success", "collector", name); got != want {
				t.Errorf("%s: success %v, want %v", name, got, want)
			}
		}
		// A failing collector keeps its partial metrics; a panicking one
		// emitted nothing before the panic.
		if got := value(t, mfs, "xdp_test_fake_value", "name", "fails"); got != 1 {
			t.Errorf("fails: partial metric %v", got)
		}
		if n := len(mfs["xdp_test_fake_value"].GetMetric()); n != 2 {
			t.Errorf("%d fake samples, want 2 (ok, fails)", n)
		}
	}
}
