package collector

import (
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// BenchmarkNapiCost measures live-frame throughput into an XDP_DROP veth
// with and without the napi collector attached. Each iteration is one
// pair of runs, in alternating order, so drift on a shared machine hits
// both alike; it reports the medians of each side and the median of the
// per-pair ratios (with/without). Run with -benchtime=Nx for N pairs:
//
//	go test ./collector -run '^$' -bench BenchmarkNapiCost -benchtime=21x
func BenchmarkNapiCost(b *testing.B) {
	lab := newNapiLab(b)
	const frames = 500_000
	rate := func() float64 {
		start := time.Now()
		sent := lab.send(b, frames, 0, 1)
		return float64(sent) / time.Since(start).Seconds()
	}
	withCollector := func() float64 {
		c := newTestNapiUncleaned(b)
		defer func() {
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
		}()
		return rate()
	}
	var off, on, ratios []float64
	for i := 0; b.Loop(); i++ {
		var a, w float64
		if i%2 == 0 {
			a, w = rate(), withCollector()
		} else {
			w, a = withCollector(), rate()
		}
		off, on, ratios = append(off, a), append(on, w), append(ratios, w/a)
	}
	b.ReportMetric(median(off)/1e6, "Mpps-without")
	b.ReportMetric(median(on)/1e6, "Mpps-with")
	b.ReportMetric(median(ratios), "ratio")
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

// BenchmarkNapiProgramRunTime reports what each of the collector's
// programs costs per run, from the kernel's own BPF statistics
// (BPF_ENABLE_STATS, which adds two clock reads per run of every program
// and therefore is not held during BenchmarkNapiCost), under live-frame
// load into an XDP_DROP veth.
func BenchmarkNapiProgramRunTime(b *testing.B) {
	lab := newNapiLab(b)
	stats, err := ebpf.EnableStats(unix.BPF_STATS_RUN_TIME)
	testenv.Check(b, err, "enabling BPF run-time statistics")
	defer stats.Close()
	c := newTestNapiUncleaned(b)
	defer c.Close()
	var sent uint64
	for b.Loop() {
		sent += lab.send(b, 1_000_000, 0, 1)
	}
	for _, p := range c.progs {
		st, err := p.prog.Stats()
		if err != nil {
			b.Fatal(err)
		}
		if st.RunCount == 0 {
			continue
		}
		name := strings.TrimPrefix(p.tracepoint[strings.Index(p.tracepoint, ":")+1:], "softirq_")
		b.ReportMetric(float64(st.Runtime.Nanoseconds())/float64(st.RunCount), "ns/"+name)
		if p.tracepoint == "napi:napi_poll" {
			b.ReportMetric(float64(st.Runtime.Nanoseconds())/float64(sent), "ns-poll/frame")
		}
	}
}
