package collector

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/netlab"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/trafficgen"
)

// BenchmarkXDPCollectorCost measures what the tracepoint collectors cost
// the packet path: live-frame throughput from one CPU into a veth whose XDP
// program drops everything, with no collector, with the default xdp
// collector, with the default BPF collectors (xdp and napi, with its
// softirq tracepoints) and with --collector.xdp.redirect-success. Each
// iteration is one round of the modes in turn, so drift on a shared machine
// hits all alike; the reported figures are medians over rounds. Received
// frames are veth's own per-queue XDP drop counters.
//
// The generator's XDP_TX is itself a redirect in live-frame mode, so the
// default collector sees one xdp:xdp_devmap_xmit event per bulk of 16
// frames and the opt-in one an xdp:xdp_redirect event per frame: this is
// the cost the seed saw when running xdp_monitor.
//
//	go test ./collector -run '^$' -bench XDPCollectorCost -benchtime 5x
func BenchmarkXDPCollectorCost(b *testing.B) {
	pair := netlab.TestPair(b, 1)
	xdpAttach(b, pair.Host.Index, xdpReturn(1)) // XDP_DROP
	g, err := trafficgen.New()
	testenv.Check(b, err, "loading the traffic generator")
	defer g.Close()
	e, err := ethtool.NewEthtool()
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	received := func() uint64 {
		s, err := e.Stats(pair.Host.Name)
		if err != nil {
			b.Fatal(err)
		}
		return s["rx_queue_0_xdp_drops"]
	}

	xdpOnly := func(cfg XDPConfig) func() ([]Collector, error) {
		return func() ([]Collector, error) {
			c, err := NewXDPCollector(cfg, discardLogger())
			return []Collector{c}, err
		}
	}
	modes := []struct {
		name  string
		start func() ([]Collector, error)
	}{
		{"none", func() ([]Collector, error) { return nil, nil }},
		{"default", xdpOnly(XDPConfig{})},
		{"default_bpf", func() ([]Collector, error) {
			x, err := NewXDPCollector(XDPConfig{}, discardLogger())
			if err != nil {
				return nil, err
			}
			n, err := NewNapiCollector(NapiConfig{Softirq: true}, discardLogger())
			return []Collector{x, n}, err
		}},
		{"redirect-success", xdpOnly(XDPConfig{RedirectSuccess: true})},
	}
	const runFor = 2 * time.Second
	mpps := make([][]float64, len(modes))
	for i := 0; i < b.N; i++ {
		for m, mode := range modes {
			cs, err := mode.start()
			testenv.Check(b, err, "starting the collectors")
			before := received()
			ctx, cancel := context.WithTimeout(context.Background(), runFor)
			start := time.Now()
			_, err = g.Run(ctx, trafficgen.Config{
				NS: pair.NS, Ifindex: pair.Peer.Index,
				SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
				CPUs: []int{1},
			})
			elapsed := time.Since(start)
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			mpps[m] = append(mpps[m], float64(received()-before)/elapsed.Seconds()/1e6)
			for _, c := range cs {
				if err := c.Close(); err != nil {
					b.Fatal(err)
				}
			}
		}
	}
	med := make([]float64, len(modes))
	for m, mode := range modes {
		med[m] = median(mpps[m])
		b.ReportMetric(med[m], "Mpps_"+mode.name)
		b.Logf("%-16s median %.3f Mpps over %d runs %s", mode.name, med[m], len(mpps[m]), xdpFmtRuns(mpps[m]))
	}
	for m := 1; m < len(modes); m++ {
		b.ReportMetric(med[m]/med[0], "ratio_"+modes[m].name)
	}
}

func xdpFmtRuns(v []float64) string {
	out := "["
	for i, x := range v {
		if i > 0 {
			out += " "
		}
		out += fmt.Sprintf("%.3f", x)
	}
	return out + "]"
}

// BenchmarkXDPCollectorProgramCost reads what the throughput A/B cannot
// resolve on a busy machine: the kernel's own accounting of the collector's
// programs (BPF_ENABLE_STATS run_time_ns / run_cnt) during a live-frame
// run into XDP_DROP, as ns per program run and BPF ns per received frame.
// The tracepoint's own dispatch cost is not included. An empty tp_btf
// program on xdp:xdp_devmap_xmit runs beside the collector's and gives the
// floor of that accounting (the clock reads and call of a program that does
// nothing), so ours minus it is the work our program adds.
//
//	go test ./collector -run '^$' -bench XDPCollectorProgramCost -benchtime 3x
func BenchmarkXDPCollectorProgramCost(b *testing.B) {
	pair := netlab.TestPair(b, 1)
	xdpAttach(b, pair.Host.Index, xdpReturn(1)) // XDP_DROP
	g, err := trafficgen.New()
	testenv.Check(b, err, "loading the traffic generator")
	defer g.Close()
	stats, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	testenv.Check(b, err, "enabling BPF run-time stats")
	defer stats.Close()
	empty, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name: "empty_devmap", Type: ebpf.Tracing, AttachType: ebpf.AttachTraceRawTp,
		AttachTo: "xdp_devmap_xmit", License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	testenv.Check(b, err, "loading an empty tp_btf program")
	defer empty.Close()
	el, err := link.AttachTracing(link.TracingOptions{Program: empty, AttachType: ebpf.AttachTraceRawTp})
	testenv.Check(b, err, "attaching an empty tp_btf program")
	defer el.Close()

	for _, mode := range []struct {
		name string
		cfg  XDPConfig
	}{{"default", XDPConfig{}}, {"redirect-success", XDPConfig{RedirectSuccess: true}}} {
		var runs, nanos, frames uint64
		perProg := map[string][2]uint64{}
		emptyBefore, err := empty.Stats()
		if err != nil {
			b.Fatal(err)
		}
		for i := 0; i < b.N; i++ {
			c, err := NewXDPCollector(mode.cfg, discardLogger())
			testenv.Check(b, err, "starting the xdp collector")
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			sent, err := g.Run(ctx, trafficgen.Config{
				NS: pair.NS, Ifindex: pair.Peer.Index,
				SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
				CPUs: []int{1},
			})
			cancel()
			if err != nil {
				b.Fatal(err)
			}
			frames += sent
			for _, p := range c.(*xdpCollector).progs {
				st, err := p.Stats()
				if err != nil {
					b.Fatal(err)
				}
				runs += st.RunCount
				nanos += uint64(st.Runtime.Nanoseconds())
				info, err := p.Info()
				if err != nil {
					b.Fatal(err)
				}
				pp := perProg[info.Name]
				perProg[info.Name] = [2]uint64{pp[0] + st.RunCount, pp[1] + uint64(st.Runtime.Nanoseconds())}
			}
			if err := c.Close(); err != nil {
				b.Fatal(err)
			}
		}
		emptyAfter, err := empty.Stats()
		if err != nil {
			b.Fatal(err)
		}
		emptyRuns := emptyAfter.RunCount - emptyBefore.RunCount
		emptyPerRun := float64(emptyAfter.Runtime-emptyBefore.Runtime) / float64(max(emptyRuns, 1))
		b.Logf("%-16s %-16s %9d runs %6.1f ns per run (floor)", mode.name, "empty", emptyRuns, emptyPerRun)
		b.ReportMetric(emptyPerRun, "ns/run_empty_"+mode.name)
		perRun := float64(nanos) / float64(max(runs, 1))
		perFrame := float64(nanos) / float64(frames)
		b.ReportMetric(perRun, "ns/run_"+mode.name)
		b.ReportMetric(perFrame, "ns/frame_"+mode.name)
		for name, pp := range perProg {
			if pp[0] > 0 {
				b.Logf("%-16s %-16s %9d runs %6.1f ns per run", mode.name, name, pp[0], float64(pp[1])/float64(pp[0]))
			}
		}
		b.Logf("%-16s %d frames, %d program runs (%.3f per frame), %.1f ns per run, %.2f ns per frame",
			mode.name, frames, runs, float64(runs)/float64(frames), perRun, perFrame)
	}
}
