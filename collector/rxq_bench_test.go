package collector

import (
	"context"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// BenchmarkRxqLiveFrames sends real frames at the generator's full rate
// from both CPUs into a veth end running, alternately, a bare XDP_DROP and
// the rxq collector with action drop, and reports the median throughput of
// each and their ratio, and the CPU time per frame of each. On veth the receiving NAPI runs on the sending CPU,
// so the program's cost shows in the rate. Run with -benchtime=20x or more
// (an even count: the order alternates).
func BenchmarkRxqLiveFrames(b *testing.B) {
	const frames = 2_000_000
	pair := vethtest.Pair(b, 2)
	g, err := trafficgen.New()
	testenv.Check(b, err, "loading the traffic generator")
	defer g.Close()
	bare := xdpDrop(b)

	// rate returns frames per second by the wall clock and CPU nanoseconds
	// per frame by the process CPU clock: the generator's threads run the
	// receiving NAPI in their own softirq context (this kernel has no
	// separate IRQ time accounting), so the CPU clock sees the program's
	// cost without the time other tasks on a busy machine held the CPUs.
	rate := func() (float64, float64) {
		warm := trafficgen.Config{
			NS: pair.NS, Ifindex: pair.Peer.Index,
			SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
			Count: 1 << 16, CPUs: []int{0, 1},
		}
		if _, err := g.Run(context.Background(), warm); err != nil {
			b.Fatal(err)
		}
		start, cpu0 := time.Now(), processCPU(b)
		sent, err := g.Run(context.Background(), trafficgen.Config{
			NS: pair.NS, Ifindex: pair.Peer.Index,
			SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
			Count: frames, CPUs: []int{0, 1},
		})
		if err != nil {
			b.Fatal(err)
		}
		return float64(sent) / time.Since(start).Seconds(), float64(processCPU(b)-cpu0) / float64(sent)
	}
	var base, rxq, baseCPU, rxqCPU []float64
	runBare := func() {
		l, err := link.AttachXDP(link.XDPOptions{Program: bare, Interface: pair.Host.Index})
		testenv.Check(b, err, "attaching XDP_DROP")
		defer l.Close()
		pps, ns := rate()
		base, baseCPU = append(base, pps), append(baseCPU, ns)
	}
	runRxq := func() {
		c, err := NewRxqCollector(RxqConfig{Devices: []string{pair.Host.Name}, Action: "drop"}, slog.New(slog.DiscardHandler))
		testenv.Check(b, err, "starting the rxq collector")
		defer c.Close()
		pps, ns := rate()
		rxq, rxqCPU = append(rxq, pps), append(rxqCPU, ns)
	}
	for i := 0; i < b.N; i++ {
		// Whichever runs second in a pair comes out slower by the wall
		// clock (the kernel is still tearing down the first one's
		// program), so the order alternates: ABBA.
		if i%2 == 0 {
			runBare()
			runRxq()
		} else {
			runRxq()
			runBare()
		}
	}
	b.Logf("per round: bare pps %.0f\nrxq pps %.0f\nbare CPU ns/frame %.1f\nrxq CPU ns/frame %.1f", base, rxq, baseCPU, rxqCPU)
	med := func(v []float64) float64 {
		sort.Float64s(v)
		return v[len(v)/2]
	}
	b.ReportMetric(med(base)/1e6, "bare-Mpps")
	b.ReportMetric(med(rxq)/1e6, "rxq-Mpps")
	b.ReportMetric(med(rxq)/med(base), "ratio")
	b.ReportMetric(med(rxqCPU)-med(baseCPU), "extra-cpu-ns/frame")
	b.ReportMetric(med(baseCPU), "bare-cpu-ns/frame")
	b.ReportMetric(med(rxqCPU), "rxq-cpu-ns/frame")
	b.ReportMetric(0, "ns/op")
}

func processCPU(b *testing.B) int64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_PROCESS_CPUTIME_ID, &ts); err != nil {
		b.Fatal(err)
	}
	return ts.Nano()
}
