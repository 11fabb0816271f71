package collector

import (
	"slices"
	"testing"
	"time"
)

// BenchmarkNapiCost measures live-frame throughput into an XDP_DROP veth
// with and without the napi collector attached, alternating the two in
// every iteration so that drift on a shared machine hits both alike. It
// reports the medians and their ratio; run with -benchtime=Nx for N pairs:
//
//	go test ./collector -run '^$' -bench BenchmarkNapiCost -benchtime=7x
func BenchmarkNapiCost(b *testing.B) {
	lab := newNapiLab(b)
	const frames = 2_000_000
	rate := func() float64 {
		start := time.Now()
		sent := lab.send(b, frames, 0, 1)
		return float64(sent) / time.Since(start).Seconds()
	}
	var off, on []float64
	for b.Loop() {
		off = append(off, rate())
		c := newTestNapiUncleaned(b)
		on = append(on, rate())
		if err := c.Close(); err != nil {
			b.Fatal(err)
		}
	}
	mOff, mOn := median(off), median(on)
	b.ReportMetric(mOff/1e6, "Mpps-without")
	b.ReportMetric(mOn/1e6, "Mpps-with")
	b.ReportMetric(mOn/mOff, "ratio")
}

// newTestNapiUncleaned builds the collector with every tracepoint for a
// benchmark that closes it itself.
func newTestNapiUncleaned(b *testing.B) *NapiCollector {
	c, err := NewNapiCollector(NapiConfig{Softirq: true}, discardLogger())
	if err != nil {
		b.Fatal(err)
	}
	return c
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
