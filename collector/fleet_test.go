package collector

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// hostServer serves the whole-host fixture with the default flags as a
// live target: every counter (and histogram) grows by its fixture value
// each second, so each of its rates is the fixture's value per second
// and every recording rule that needs traffic has it.
func hostServer(t *testing.T) *httptest.Server {
	set, links := hostSet(t, commandLineHostFlags(t))
	start := time.Now()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reg := prometheus.NewRegistry()
		reg.MustRegister(set.scrapeOn(r.Context(), links))
		mfs, err := reg.Gather()
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		k := 1 + time.Since(start).Seconds()
		enc := expfmt.NewEncoder(w, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				if c := m.GetCounter(); c != nil {
					c.Value = new(c.GetValue() * k)
				}
				if u := m.GetUntyped(); u != nil {
					u.Value = new(u.GetValue() * k)
				}
				if h := m.GetHistogram(); h != nil {
					h.SampleCount, h.SampleSum = new(uint64(float64(h.GetSampleCount())*k)), new(h.GetSampleSum()*k)
					for _, b := range h.GetBucket() {
						b.CumulativeCount = new(uint64(float64(b.GetCumulativeCount()) * k))
					}
				}
			}
			if err := enc.Encode(mf); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// TestHostShipped measures what a fleet's global tier receives from the
// whole-host fixture (128 CPUs, two 64-queue ports, every default
// collector, some 5,900 series): two edge Prometheus servers scrape it,
// one every second and one every 15 s, each with the edge rules and
// deploy/prometheus/edge.yml's remote write into one global receiver. The
// host ships at most 300 series at either interval; the test reports the
// series by name and the remote write's samples and bytes per second,
// which docs/scaling.md quotes.
func TestHostShipped(t *testing.T) {
	testenv.Privileged(t)
	if _, err := exec.LookPath("prometheus"); err != nil {
		testenv.Unavailable(t, "prometheus not installed (apt-get install prometheus)")
	}
	srv := hostServer(t)
	rules, err := filepath.Abs(filepath.Join("..", "dashboards", "rules"))
	if err != nil {
		t.Fatal(err)
	}
	global := promtest.StartConfig(t, promtest.Place(t, "../deploy/prometheus/global.yml",
		promtest.Placement{Interval: 15 * time.Second, RuleDir: rules}), "--web.enable-remote-write-receiver")
	target := srv.Listener.Addr().String()
	intervals := []time.Duration{time.Second, 15 * time.Second}
	edges := map[time.Duration]*promtest.Server{}
	for _, iv := range intervals {
		edges[iv] = promtest.StartConfig(t, promtest.Place(t, "../deploy/prometheus/edge.yml", promtest.Placement{
			Targets: []string{target}, Interval: iv, RuleDir: rules,
			// prometheus tells the two edges' copies of the host apart.
			ExternalLabels: map[string]string{"cluster": "fixture", "prometheus": iv.String()},
			WriteURL:       global.WriteURL()}))
	}
	ctx := context.Background()
	shipped := func(iv time.Duration) float64 {
		n, err := global.Scalar(ctx, fmt.Sprintf(`count({prometheus=%q})`, iv))
		if err != nil {
			return 0
		}
		return n
	}
	// The set is complete once a rate window has two samples at 15 s and
	// the count holds over a further evaluation. That takes about 100 s
	// alone on the development VM; 2 minutes was reached once under
	// CI's load, with two series still missing at 15 s, so the wait is 3
	// minutes, and a failure names the families that differ.
	var last float64
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(15 * time.Second) {
		n := shipped(15 * time.Second)
		if n > 0 && n == last && n == shipped(time.Second) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the global tier's series do not settle: %v at 15 s, %v at 1 s; by family, 15 s %v, 1 s %v",
				n, shipped(time.Second), byName(t, global, "15s"), byName(t, global, "1s"))
		}
		last = n
	}
	var wg sync.WaitGroup
	rates := map[time.Duration][2]float64{}
	var mu sync.Mutex
	for _, iv := range intervals {
		wg.Go(func() {
			s, b, err := edges[iv].RemoteWritten(60 * time.Second)
			if err != nil {
				t.Errorf("edge every %v: %v", iv, err)
			}
			mu.Lock()
			rates[iv] = [2]float64{s, b}
			mu.Unlock()
		})
	}
	wg.Wait()
	for _, iv := range intervals {
		n := shipped(iv)
		t.Logf("scrapes every %v: the host ships %.0f series; remote write %.1f samples/s, %.0f bytes/s", iv, n, rates[iv][0], rates[iv][1])
		if n > 300 {
			t.Errorf("scrapes every %v: the host ships %.0f series, over 300", iv, n)
		}
	}
	v, err := global.Query(ctx, `sort_desc(count by (__name__) ({prometheus="1s"}))`)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range v.(model.Vector) {
		names = append(names, fmt.Sprintf("%4.0f %s", float64(s.Value), s.Metric["__name__"]))
	}
	sort.Strings(names)
	t.Logf("shipped by name:\n%s", strings.Join(names, "\n"))
}

// byName is the global tier's series count per family of one edge.
func byName(t *testing.T, global *promtest.Server, edge string) map[string]float64 {
	t.Helper()
	v, err := global.Query(context.Background(), fmt.Sprintf(`count by (__name__) ({prometheus=%q})`, edge))
	if err != nil {
		t.Log(err)
		return nil
	}
	out := map[string]float64{}
	if vec, ok := v.(model.Vector); ok {
		for _, s := range vec {
			out[string(s.Metric[model.MetricNameLabel])] = float64(s.Value)
		}
	}
	return out
}
