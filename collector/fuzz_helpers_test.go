package collector

import (
	"bytes"
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nltest"
)

// Helpers shared by the fuzz targets (docs/dev/fuzzing.md). Unlike gather they
// report problems as errors, so a target can decide which ones are bugs.

// collect runs one Update and returns what it sent and its error. A panic
// is deliberately not recovered: the fuzzer must see it.
func collect(c Collector) ([]prometheus.Metric, error) {
	var err error
	ms := collectSent(func(ch chan<- prometheus.Metric) {
		err = c.Update(context.Background(), NewLinkSnapshot(), ch)
	})
	return ms, err
}

// replayed is a prometheus.Collector that sends a fixed set of metrics.
type replayed []prometheus.Metric

func (replayed) Describe(chan<- *prometheus.Desc) {}

func (r replayed) Collect(ch chan<- prometheus.Metric) {
	for _, m := range r {
		ch <- m
	}
}

// pedanticGather passes metrics through a pedantic registry, which rejects
// invalid metric and label names, label values that are not UTF-8,
// inconsistent label sets and duplicate series.
func pedanticGather(ms []prometheus.Metric) ([]*dto.MetricFamily, error) {
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(replayed(ms)); err != nil {
		return nil, err
	}
	return reg.Gather()
}

// exposition renders families in the text format, to compare two scrapes.
func exposition(t *testing.T, mfs []*dto.MetricFamily) string {
	t.Helper()
	var b bytes.Buffer
	for _, mf := range mfs {
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

// writeAll checks that every metric can be written out, which is where a
// metric built without validation (prebuilt.Metric) or with a bad descriptor
// fails.
func writeAll(t *testing.T, ms []prometheus.Metric) {
	t.Helper()
	for _, m := range ms {
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatalf("%s: %v", m.Desc(), err)
		}
	}
}

// hexFixture reads a file of recorded replies as the fuzz targets' seed.
func hexFixture(f *testing.F, path string) []byte {
	b, err := nltest.ReadHex(path)
	if err != nil {
		f.Fatal(err)
	}
	return b
}
