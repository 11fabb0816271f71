package collector

import (
	"log/slog"
	"regexp"
	"runtime"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/bpfprog"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/tcprog"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/stat"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// BenchmarkBPFStatsCost measures what --collector.bpf.enable-stats costs
// every BPF program run: a bare XDP_DROP program runs through BPF_PROG_RUN
// with a large repeat count, timed over the whole call (by wall clock and by
// the thread's CPU clock) so the syscall's own cost vanishes in the division, once with statistics off and
// once with a BPF_ENABLE_STATS fd held, alternating which goes first. Each
// b.N iteration is one off/on pair; run it with -benchtime=11x or so and read
// the medians:
//
//	go test ./collector -run '^$' -bench BPFStatsCost -benchtime=11x
func BenchmarkBPFStatsCost(b *testing.B) {
	testenv.Privileged(b)
	if on, err := bpfprog.StatsEnabled("/proc"); err != nil || on {
		testenv.Unavailable(b, "kernel.bpf_stats_enabled must be 0 to measure statistics off (on=%v, err=%v)", on, err)
	}
	prog := vethtest.Verdict(b, "xdpt_bench", xdptest.Drop)

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var cpu unix.CPUSet
	cpu.Set(0)
	if err := unix.SchedSetaffinity(0, &cpu); err != nil {
		b.Fatal(err)
	}

	r := statsRunner{b: b, prog: prog}
	r.run() // warm caches and the JIT image
	var off, on []statsSample
	b.ResetTimer()
	for i := range b.N {
		if i%2 == 0 {
			off = append(off, r.measure(false))
			on = append(on, r.measure(true))
		} else {
			on = append(on, r.measure(true))
			off = append(off, r.measure(false))
		}
	}
	b.StopTimer()
	for _, clock := range []struct {
		name string
		get  func(statsSample) float64
	}{{"cpu", func(s statsSample) float64 { return s.cpu }}, {"wall", func(s statsSample) float64 { return s.wall }}} {
		var xOff, xOn []float64
		for i := range off {
			xOff, xOn = append(xOff, clock.get(off[i])), append(xOn, clock.get(on[i]))
		}
		mOff, mOn := stat.Median(xOff), stat.Median(xOn)
		b.Logf("%s clock, ns per run: statistics off %.1f, on %.1f", clock.name, xOff, xOn)
		b.ReportMetric(mOff, clock.name+"-ns/run-off")
		b.ReportMetric(mOn, clock.name+"-ns/run-on")
		b.ReportMetric(mOn-mOff, clock.name+"-ns/run-added")
		b.ReportMetric(mOn/mOff, clock.name+"-ratio")
	}
}

// statsRepeat is the runs of one BPF_PROG_RUN call.
const statsRepeat = 5_000_000

// statsRunner times an XDP program under BPF_PROG_RUN.
type statsRunner struct {
	b    *testing.B
	prog *ebpf.Program
}

// statsSample is the ns per program run by wall clock and by the thread's
// CPU clock. The CPU clock leaves out the time other tasks held this CPU,
// which on a shared machine dominates the spread of the wall clock.
type statsSample struct{ wall, cpu float64 }

// run runs the program statsRepeat times and returns the time per run and
// the run count the kernel added, which tells whether statistics were
// really on.
func (r statsRunner) run() (statsSample, uint64) {
	opts := &ebpf.RunOptions{Data: make([]byte, trafficgen.MinFrameSize), Repeat: statsRepeat}
	before, err := r.prog.Stats()
	if err != nil {
		r.b.Fatal(err)
	}
	start, startCPU := time.Now(), threadCPU(r.b)
	if _, err := r.prog.Run(opts); err != nil {
		r.b.Fatal(err)
	}
	s := statsSample{cpu: float64(threadCPU(r.b)-startCPU) / statsRepeat,
		wall: float64(time.Since(start).Nanoseconds()) / statsRepeat}
	after, err := r.prog.Stats()
	if err != nil {
		r.b.Fatal(err)
	}
	return s, after.RunCount - before.RunCount
}

// measure runs with statistics on (a BPF_ENABLE_STATS fd held for the
// run) or off, checking that the kernel counted accordingly.
func (r statsRunner) measure(on bool) statsSample {
	if !on {
		s, counted := r.run()
		if counted != 0 {
			r.b.Fatalf("statistics off, yet the kernel counted %d runs: another process holds BPF_ENABLE_STATS", counted)
		}
		return s
	}
	fd, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	testenv.Check(r.b, err, "BPF_ENABLE_STATS")
	defer fd.Close()
	s, counted := r.run()
	// More runs than asked is a run that a signal interrupted and
	// cilium/ebpf started over (runEach in bpf/rxq's tests).
	if counted < statsRepeat {
		r.b.Fatalf("statistics on, yet the kernel counted %d of %d runs", counted, statsRepeat)
	}
	return s
}

// threadCPU reads the calling thread's CPU clock in ns.
func threadCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}

// BenchmarkBPFScrapeTC measures what reading the traffic-control hooks
// adds to the bpf collector's scrape, side by side in one run: with
// tcDevices veth pairs in the namespace (one of them with clsact, a
// filter on each hook and, where the kernel has tcx, a tcx program),
// "xdp-only" leaves out xdp_bpf_tc_prog_info (--collector.bpf.metrics-exclude,
// which skips the reading), "control" is xdp-only again (the noise
// floor), "tc" is the default. Each b.N iteration is one round of
// scrapesPerRound scrapes of each variant, in an order rotated every
// round; medians of the ms per scrape over the rounds, ratios to
// xdp-only:
//
//	go test ./collector -run '^$' -bench BPFScrapeTC -benchtime=31x
func BenchmarkBPFScrapeTC(b *testing.B) {
	const tcDevices, scrapesPerRound = 50, 100
	var first *vethns.Pair
	for i := range tcDevices {
		p := vethtest.Pair(b, 1)
		if i == 0 {
			first = p
		}
	}
	vethtest.AttachVerdictTo(b, first.Host.Index, xdptest.Pass)
	vethtest.AttachTC(b, first.Host.Index, "ingress", 1, vethtest.TCProgram(b, "xdpb_tc_in"))
	vethtest.AttachTC(b, first.Host.Index, "egress", 1, vethtest.TCProgram(b, "xdpb_tc_out"))
	if tcprog.ProbeTCX() == nil {
		l, err := link.AttachTCX(link.TCXOptions{Interface: first.Host.Index, Program: vethtest.TCProgram(b, "xdpb_tcx_in"), Attach: ebpf.AttachTCXIngress})
		testenv.Check(b, err, "attaching tcx ingress")
		b.Cleanup(func() { l.Close() })
	}
	noTC, err := newFamilyFilter("bpf", nil, regexp.MustCompile("tc_prog_info"), nil)
	if err != nil {
		b.Fatal(err)
	}
	variants := []struct {
		name string
		c    *bpfCollector
	}{
		{"xdp-only", benchBPF(b, BPFConfig{Filter: Filter{Families: noTC}})},
		{"control", benchBPF(b, BPFConfig{Filter: Filter{Families: noTC}})},
		{"tc", benchBPF(b, BPFConfig{})},
	}
	runs := make([][]float64, len(variants))
	b.ResetTimer()
	for round := range b.N {
		for k := range variants {
			v := (round + k) % len(variants)
			start := time.Now()
			for range scrapesPerRound {
				drain(b, variants[v].c)
			}
			runs[v] = append(runs[v], float64(time.Since(start).Microseconds())/1e3/scrapesPerRound)
			time.Sleep(200 * time.Millisecond)
		}
	}
	b.StopTimer()
	base := stat.Median(runs[0])
	for v, variant := range variants {
		m := stat.Median(runs[v])
		b.ReportMetric(m, variant.name+"-ms/scrape")
		b.ReportMetric(m/base, variant.name+"-ratio")
	}
	b.ReportMetric(0, "ns/op")
}

func benchBPF(b *testing.B, cfg BPFConfig) *bpfCollector {
	b.Helper()
	c, err := newBPFCollector(cfg, slog.New(slog.DiscardHandler))
	testenv.Check(b, err, "building the bpf collector")
	b.Cleanup(func() { c.Close() })
	return c
}
