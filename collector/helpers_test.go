package collector

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// discardLogger keeps test output to failures.
func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// logBuf captures a collector's log lines for assertions.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger { return slog.New(slog.NewTextHandler(l, nil)) }

// recorder adapts a Collector whose Update may fail to a pedantic
// registry, keeping the error instead of panicking.
type recorder struct {
	c   Collector
	err error
}

func (r *recorder) Describe(chan<- *prometheus.Desc) {}

func (r *recorder) Collect(ch chan<- prometheus.Metric) { r.err = r.c.Update(context.Background(), ch) }

// single adapts one Collector to prometheus.Collector for a pedantic registry.
type single struct{ c Collector }

func (s single) Describe(chan<- *prometheus.Desc) {} // unchecked: families are dynamic

func (s single) Collect(ch chan<- prometheus.Metric) {
	if err := s.c.Update(context.Background(), ch); err != nil {
		panic(err)
	}
}

// gather runs one Update through a pedantic registry (which rejects
// duplicates and inconsistent label sets), lints the result with the
// Prometheus naming rules, and returns the families by name.
func gather(t testing.TB, c Collector) map[string]*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(single{c})
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	problems, err := testutil.GatherAndLint(reg)
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// value returns the value of the sample of family name whose labels include
// every name=value pair given, failing the test unless exactly one matches.
func value(t testing.TB, mfs map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := mfs[name]
	if !ok {
		t.Fatalf("family %s missing", name)
	}
	var found []float64
	for _, m := range mf.GetMetric() {
		if hasLabels(m, labels) {
			switch {
			case m.Counter != nil:
				found = append(found, m.GetCounter().GetValue())
			case m.Gauge != nil:
				found = append(found, m.GetGauge().GetValue())
			case m.Untyped != nil:
				found = append(found, m.GetUntyped().GetValue())
			default:
				t.Fatalf("%s: value() reads counters, gauges and untyped only", name)
			}
		}
	}
	if len(found) != 1 {
		t.Fatalf("%s{%s}: %d samples match, want 1", name, strings.Join(labels, ","), len(found))
	}
	return found[0]
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		ok := false
		for _, lp := range m.GetLabel() {
			if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
				ok = true
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// sumFamily adds the samples of name whose labels include the given pairs.
func sumFamily(mfs map[string]*dto.MetricFamily, name string, labels ...string) (sum float64, n int) {
	for _, m := range mfs[name].GetMetric() {
		if hasLabels(m, labels) {
			sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
			n++
		}
	}
	return sum, n
}

// median of benchmark samples: the machine is shared and noisy.
func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// linksAddedBy builds collector name from its flags (args) as the exporter
// does and returns the names of the programs it attached to tracepoints,
// sorted, from the kernel's own list of links.
func linksAddedBy(t *testing.T, name string, args []string) []string {
	t.Helper()
	app := kingpin.New("test", "")
	sel := AddFlags(app)
	if _, err := app.Parse(args); err != nil {
		t.Fatal(err)
	}
	shared, err := sel.shared(name)
	if err != nil {
		t.Fatal(err)
	}
	before := tracingLinks(t)
	c, err := sel.builders[name](discardLogger(), shared)
	testenv.Check(t, err, "building the "+name+" collector")
	after := tracingLinks(t)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	var added []string
	for prog, n := range after {
		for range n - before[prog] {
			added = append(added, prog)
		}
	}
	slices.Sort(added)
	return added
}

// tracingLinks counts the kernel's tracepoint links by program name.
func tracingLinks(t *testing.T) map[string]int {
	t.Helper()
	out := map[string]int{}
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		// tp_btf programs attach through BPF_RAW_TRACEPOINT_OPEN.
		if err == nil && (info.Type == link.RawTracepointType || info.Type == link.TracingType) {
			if p, err := ebpf.NewProgramFromID(info.Program); err == nil {
				if pi, err := p.Info(); err == nil {
					out[pi.Name]++
				}
				p.Close()
			}
		}
	}
	if err := it.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// benchUpdate runs c.Update once per benchmark iteration, its metrics
// drained and dropped, with allocations reported.
func benchUpdate(b *testing.B, c Collector) {
	b.Helper()
	ch := make(chan prometheus.Metric, 4096)
	b.ReportAllocs()
	for b.Loop() {
		if err := c.Update(context.Background(), ch); err != nil {
			b.Fatal(err)
		}
		for len(ch) > 0 {
			<-ch
		}
	}
}
