package collector

import (
	"context"
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// fixedLinks is a scrape's interface dump that is l.
func fixedLinks(l *Links) *LinkSnapshot {
	s := NewLinkSnapshot()
	s.once.Do(func() { s.links = l })
	return s
}

// onLinks is a collector whose scrapes see links as the interface dump,
// as a scrape of the exporter's handler sees the one it took.
type onLinks struct {
	Collector
	links *Links
}

func (o onLinks) Update(ctx context.Context, _ *LinkSnapshot, ch chan<- prometheus.Metric) error {
	return o.Collector.Update(ctx, fixedLinks(o.links), ch)
}

// recorder adapts a Collector whose Update may fail to a pedantic
// registry, keeping the error instead of panicking.
type recorder struct {
	c   Collector
	err error
}

func (r *recorder) Describe(chan<- *prometheus.Desc) {}

func (r *recorder) Collect(ch chan<- prometheus.Metric) {
	r.err = r.c.Update(context.Background(), NewLinkSnapshot(), ch)
}

// pedantic runs one Update of each collector through a pedantic registry,
// which fails the test on duplicate series and inconsistent label sets,
// and returns the families and the first error an Update returned.
func pedantic(t testing.TB, cs ...Collector) ([]*dto.MetricFamily, error) {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	rs := make([]*recorder, len(cs))
	for i, c := range cs {
		rs[i] = &recorder{c: c}
		reg.MustRegister(rs[i])
	}
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("gather: %v", err)
	}
	for _, r := range rs {
		if r.err != nil {
			return mfs, r.err
		}
	}
	return mfs, nil
}

// gatherErr runs one Update of c through a pedantic registry, lints the
// result with the Prometheus naming rules, and returns the families by
// name and Update's error. Findings about units in the names of untyped
// raw driver stats (mlx5's pfc_pri0_rx_duration_us, rx_bits) are the
// driver's naming, passed through as the driver spells it, so they are not
// failures; every other finding is.
func gatherErr(t testing.TB, c Collector) (exportertest.Families, error) {
	t.Helper()
	mfs, updateErr := pedantic(t, c)
	problems, err := testutil.GatherAndLint(prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) { return mfs, nil }))
	if err != nil {
		t.Fatalf("lint: %v", err)
	}
	for _, p := range problems {
		raw := strings.HasPrefix(p.Metric, "xdp_nic_stat_") || strings.HasPrefix(p.Metric, "xdp_nic_queue_stat_")
		if raw && strings.Contains(p.Text, "unit") {
			continue
		}
		t.Errorf("lint: %s: %s", p.Metric, p.Text)
	}
	return exportertest.ByName(mfs), updateErr
}

// gather is gatherErr for a collector whose Update must succeed.
func gather(t testing.TB, c Collector) exportertest.Families {
	t.Helper()
	mfs, err := gatherErr(t, c)
	if err != nil {
		t.Fatalf("update: %v", err)
	}
	return mfs
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
	c, err := sel.builders[name](slog.New(slog.DiscardHandler), shared)
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
		if err := c.Update(context.Background(), NewLinkSnapshot(), ch); err != nil {
			b.Fatal(err)
		}
		for len(ch) > 0 {
			<-ch
		}
	}
}
