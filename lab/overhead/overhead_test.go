package overhead

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/coreos/go-iptables/iptables"
	"github.com/safchain/ethtool"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// The benchmarks here are the method of docs/performance.md. Each
// iteration is one round of every variant; run them with -benchtime=Nx
// for N rounds, for example
//
//	go test ./lab/overhead -run '^$' -bench CollectorOverhead -benchtime 20x -v
//
// The peers (xdp-tools' xdp-monitor and xdp-bench) join when
// XDP_TOOLS_DIR names a built xdp-tools tree; they are measured in the
// same rotation, never part of the repository.

const (
	frames = 10_000_000
	pause  = 1500 * time.Millisecond
)

// newRig makes the lab and pins the harness (and so the variants'
// processes) to harnessCPU.
func newRig(b *testing.B, harnessCPU int) *Rig {
	b.Helper()
	testenv.Privileged(b)
	testenv.Check(b, PinProcess(harnessCPU), "pinning the harness")
	pair := vethtest.Pair(b, 2)
	g, err := trafficgen.New()
	testenv.Check(b, err, "loading the traffic generator")
	b.Cleanup(func() { g.Close() })
	return &Rig{Pair: pair, Gen: g}
}

// exporter is a variant running the real exporter binary with args.
func exporter(b *testing.B, name string, args ...string) Variant {
	bin := exportertest.Build(b)
	return Variant{Name: name, Start: func() (func() error, error) {
		addr := exportertest.FreeAddr(b)
		argv := append([]string{bin, "--web.listen-address=" + addr}, args...)
		return Process(name, Answers(addr), argv...).Start()
	}}
}

// control is the noise control: a process that sleeps, started and
// stopped like every other variant.
func control() Variant {
	return Process("control (sleep)", nil, "sleep", "3600")
}

// peer is a variant running an xdp-tools binary, when XDP_TOOLS_DIR is set.
func peer(name string, ready func() (bool, error), tool string, args ...string) (Variant, bool) {
	dir := os.Getenv("XDP_TOOLS_DIR")
	if dir == "" {
		return Variant{}, false
	}
	return Process(name, ready, append([]string{filepath.Join(dir, tool, tool)}, args...)...), true
}

func report(b *testing.B, res *Result, unit string) {
	b.Helper()
	b.Logf("%d rounds, medians; ratio to %s:\n%s", len(res.Runs), res.Names[0], res.Table(unit))
	for i, name := range res.Names {
		_, ratio := res.Median(i)
		b.ReportMetric(ratio, "ratio_"+metricName(name))
	}
	figure, _ := res.Median(0)
	b.ReportMetric(figure, unit+"_"+metricName(res.Names[0]))
}

func metricName(s string) string {
	s = strings.NewReplacer(" ", "_", "(", "", ")", "", "-", "_", "+", "_", ".", "_", "=", "_").Replace(s)
	return strings.Trim(s, "_")
}

// BenchmarkCollectorOverhead is the throughput A/B of the default
// collector set: 64-byte live frames from CPU 0 into a 2-queue veth whose
// XDP program drops them. Beside the bare path: a sleeping process (the
// control), the exporter without its BPF collectors, an empty program on
// napi:napi_poll (the dispatch floor under the default set's only
// per-poll program), the exporter's default set, the default set plus the
// opt-in bulk transmit tracepoints (--collector.monitor.xmit: what xdp-monitor
// attaches by default), that plus the softirq programs (the default set
// before they became opt-in), and xdp-monitor itself.
func BenchmarkCollectorOverhead(b *testing.B) {
	rig := newRig(b, 1)
	vethtest.AttachVerdict(b, rig.Pair, xdptest.Drop)
	variants := []Variant{
		Bare("bare"),
		control(),
		exporter(b, "exporter without BPF", "--no-collector.monitor", "--no-collector.napi"),
		EmptyPrograms("empty napi_poll program", "napi_poll"),
		exporter(b, "exporter default"),
		exporter(b, "exporter + xmit", "--collector.monitor.xmit"),
		exporter(b, "exporter + xmit + softirq", "--collector.monitor.xmit", "--collector.napi.softirq"),
	}
	if v, ok := peer("xdp-monitor", Linked("tp_xdp_devmap_xmit"), "xdp-monitor"); ok {
		variants = append(variants, v)
	}
	measure(b, rig, variants, Config{Frames: frames, Pause: pause}, "Mpps")
}

// BenchmarkRxqOverhead compares the rxq collector's program with
// xdp-bench's on the same path: the bare XDP_DROP program, the rxq
// program with action drop, with and without reading the packet, and
// xdp-bench drop with and without -p read-data.
func BenchmarkRxqOverhead(b *testing.B) {
	rig := newRig(b, 1)
	dev := rig.Pair.Host.Name
	rxq := func(name string, args ...string) Variant {
		return exporter(b, name, append([]string{"--no-collector.monitor", "--no-collector.napi",
			"--collector.rxq", "--collector.rxq.device=" + dev, "--collector.rxq.action=drop"}, args...)...)
	}
	variants := []Variant{
		WithDrop(rig, Bare("bare XDP_DROP")),
		WithDrop(rig, control()),
		rxq("rxq drop"),
		rxq("rxq drop read", "--collector.rxq.read"),
	}
	if v, ok := peer("xdp-bench drop", Attached(dev), "xdp-bench", "drop", dev); ok {
		variants = append(variants, v)
	}
	if v, ok := peer("xdp-bench drop read-data", Attached(dev), "xdp-bench", "drop", "-p", "read-data", dev); ok {
		variants = append(variants, v)
	}
	measure(b, rig, variants, Config{Frames: frames, Pause: pause}, "Mpps")
}

// BenchmarkCollectorDUTCost is the measure the generator's own cost does
// not dilute: the DUT's NAPI runs threaded, pinned to CPU 1, the generator
// sends from CPU 0 as fast as it can (faster than the thread drains, so
// the thread polls full budgets all along), and the figure is that
// thread's CPU time per received frame (schedstat). Only what runs on the
// DUT's poll counts here: napi_poll and the XDP program, not the
// generator's transmit.
func BenchmarkCollectorDUTCost(b *testing.B) {
	rig := newRig(b, 0)
	vethtest.AttachVerdict(b, rig.Pair, xdptest.Drop)
	pids, off, err := NapiThreads(rig, 1)
	testenv.Check(b, err, "threaded NAPI on the DUT")
	b.Cleanup(func() { off() })
	variants := []Variant{
		Bare("bare"),
		control(),
		exporter(b, "exporter without BPF", "--no-collector.monitor", "--no-collector.napi"),
		exporter(b, "exporter default"),
	}
	if v, ok := peer("xdp-monitor", Linked("tp_xdp_devmap_xmit"), "xdp-monitor"); ok {
		variants = append(variants, v)
	}
	measure(b, rig, variants, Config{Frames: frames, Pause: pause, Measure: DUTCPU(pids)}, "ns_per_frame")
}

// BenchmarkGeneratorBound shows that the rig measures the XDP path, not
// its sender, with whichever method the generator takes (forced with
// $XDP_EXPORTER_TRAFFICGEN_METHOD): beside the bare XDP_DROP path, the
// control, and a drop program slowed by 8 bpf_ktime_get_ns calls a frame.
// The control's ratio must stay within 1% of 1 and the slowed program's
// fall measurably below it.
func BenchmarkGeneratorBound(b *testing.B) {
	rig := newRig(b, 1)
	variants := []Variant{
		WithDrop(rig, Bare("bare XDP_DROP")),
		WithDrop(rig, control()),
		Slowed(rig, "XDP_DROP after 8 ktime reads", 8),
	}
	measure(b, rig, variants, Config{Frames: frames, Pause: pause}, "Mpps")
}

func measure(b *testing.B, rig *Rig, variants []Variant, cfg Config, unit string) {
	b.Helper()
	if testing.Verbose() {
		cfg.Log = b.Logf
	}
	res := New(variants)
	for round := 0; b.Loop(); round++ {
		if err := res.Round(context.Background(), rig, cfg, round); err != nil {
			b.Fatal(err)
		}
	}
	b.Logf("generator: %s", rig.Gen.Choice())
	report(b, res, unit)
}

// BenchmarkDropOverhead is the throughput A/B of the drop collector on
// the Linux-drop path, where every frame is an skb the kernel frees as
// dropped: no XDP program, GRO on the DUT (veth runs NAPI without XDP only
// with it), and the benchmark notes' raw-table rule dropping every frame in
// PREROUTING, so skb:kfree_skb fires once per frame (reason
// NETFILTER_DROP). Beside the bare path: the control, the exporter's
// default set, the default set with the drop collector, and an empty
// program on skb:kfree_skb (the tracepoint's dispatch alone).
func BenchmarkDropOverhead(b *testing.B) {
	rig := newRig(b, 1)
	linuxDrop(b, rig.Pair.Host.Name)
	variants := []Variant{
		Bare("bare"),
		control(),
		exporter(b, "exporter default"),
		exporter(b, "exporter default + drop", "--collector.drop"),
		EmptyPrograms("empty kfree_skb program", "kfree_skb"),
	}
	measure(b, rig, variants, Config{Frames: frames, Pause: pause}, "Mpps")
}

// linuxDrop makes dev the DUT of the Linux-drop scenario until the
// benchmark ends: GRO on and `iptables -t raw -A PREROUTING -i dev -j
// DROP`.
func linuxDrop(b *testing.B, dev string) {
	b.Helper()
	et, err := ethtool.NewEthtool()
	testenv.Check(b, err, "ethtool")
	b.Cleanup(et.Close)
	testenv.Check(b, et.Change(dev, map[string]bool{"rx-gro": true}), "enabling GRO on "+dev)
	ipt, err := iptables.New()
	testenv.Check(b, err, "iptables")
	rule := []string{"-i", dev, "-j", "DROP"}
	testenv.Check(b, ipt.Append("raw", "PREROUTING", rule...), "adding the raw-table DROP rule")
	b.Cleanup(func() {
		if err := ipt.Delete("raw", "PREROUTING", rule...); err != nil {
			b.Errorf("removing the raw-table DROP rule: %v", err)
		}
	})
}
