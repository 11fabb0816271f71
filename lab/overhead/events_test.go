package overhead

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/drop"
	"github.com/xdp-exporter/xdp_exporter/bpf/napi"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdpmon"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// tracedProgram is one of the exporter's tracepoint programs, found in the
// kernel, and the empty program beside it on the same tracepoint.
type tracedProgram struct {
	name, tracepoint string
	prog, empty      *ebpf.Program
}

type progCount struct{ runs, ns uint64 }

// defaultProgram names the programs the exporter attaches without opt-in
// flags.
var defaultProgram = map[string]bool{
	napi.NapiProgNapiPoll: true, xdpmon.XdpmonProgXdpException: true,
	xdpmon.XdpmonProgXdpRedirectErr: true, xdpmon.XdpmonProgXdpRedirectMapErr: true,
}

func stats(b *testing.B, p *ebpf.Program) progCount {
	b.Helper()
	st, err := p.Stats()
	if err != nil {
		b.Fatal(err)
	}
	return progCount{runs: st.RunCount, ns: uint64(st.Runtime.Nanoseconds())}
}

// exporterPrograms finds the tracepoint programs of the xdp, napi and
// drop collectors among the kernel's links, by the names bpf/xdpmon, bpf/napi
// and bpf/drop give them, and attaches an empty program to
// each one's tracepoint.
func exporterPrograms(b *testing.B) []*tracedProgram {
	b.Helper()
	byName := map[string]string{} // program name -> tracepoint
	for _, load := range []func() (*ebpf.CollectionSpec, error){xdpmon.Spec, napi.Spec, drop.Spec} {
		spec, err := load()
		if err != nil {
			b.Fatal(err)
		}
		for name, ps := range spec.Programs {
			byName[name] = ps.AttachTo
		}
	}
	var out []*tracedProgram
	it := new(link.Iterator)
	defer it.Close()
	for it.Next() {
		info, err := it.Link.Info()
		if err != nil || info.Type != link.RawTracepointType {
			continue
		}
		p, err := ebpf.NewProgramFromID(info.Program)
		if err != nil {
			continue
		}
		pi, err := p.Info()
		tp, ours := byName[pi.Name]
		if err != nil || !ours {
			p.Close()
			continue
		}
		b.Cleanup(func() { p.Close() })
		out = append(out, &tracedProgram{name: pi.Name, tracepoint: tp, prog: p})
	}
	if err := it.Err(); err != nil {
		b.Fatal(err)
	}
	for _, t := range out {
		empty, l, err := AttachEmpty(t.tracepoint)
		testenv.Check(b, err, "an empty program beside "+t.name)
		b.Cleanup(func() { l.Close(); empty.Close() })
		t.empty = empty
	}
	sort.Slice(out, func(i, j int) bool { return out[i].tracepoint < out[j].tracepoint })
	return out
}

// eventAcc adds up, over the runs of one scenario, the frames received
// and each program's run count and run time, ours and the empty one's.
type eventAcc struct {
	frames      uint64
	ours, empty map[string]progCount
}

// run runs the scenario once and adds what it cost.
func (a *eventAcc) run(b *testing.B, lb lab.Lab, sc lab.Scenario, progs []*tracedProgram) {
	before := map[*tracedProgram][2]progCount{}
	for _, p := range progs {
		before[p] = [2]progCount{stats(b, p.prog), stats(b, p.empty)}
	}
	res, err := lb.Run(context.Background(), lab.RunConfig{
		Scenario: sc, Queues: 2, Count: 2_000_000, Attach: lb.AttachRxq,
	})
	if err != nil {
		b.Fatal(err)
	}
	a.frames += res.Received
	for _, p := range progs {
		o, e := stats(b, p.prog), stats(b, p.empty)
		was := before[p]
		add := func(m map[string]progCount, now, then progCount) {
			c := m[p.name]
			m[p.name] = progCount{runs: c.runs + now.runs - then.runs, ns: c.ns + now.ns - then.ns}
		}
		add(a.ours, o, was[0])
		add(a.empty, e, was[1])
	}
}

// BenchmarkCollectorEventCost reads the kernel's own run-time statistics
// (BPF_ENABLE_STATS) of every tracepoint program of the exporter (the
// default set and the opt-in softirq, bulk transmit and drop programs)
// under each lab scenario, with an empty program on the same tracepoint in the same run:
// the empty program's ns per event is the floor of that accounting (the
// clock reads and the call), so ours minus it is what our program's work
// costs per event. Events per frame come from the same run counts. The
// tracepoint's own dispatch is in neither figure; the throughput and DUT
// benchmarks include it.
//
//	go test ./lab/overhead -run '^$' -bench CollectorEventCost -benchtime 3x -v
func BenchmarkCollectorEventCost(b *testing.B) {
	testenv.Privileged(b)
	lb := lab.ForTest(vethns.UniqueID())
	testenv.Check(b, lb.Up(2), "bringing the lab up")
	b.Cleanup(func() {
		if err := lb.Down(); err != nil {
			b.Errorf("lab down: %v", err)
		}
	})
	st, err := ebpf.EnableStats(uint32(unix.BPF_STATS_RUN_TIME))
	testenv.Check(b, err, "enabling BPF run-time statistics")
	b.Cleanup(func() { st.Close() })
	exportertest.Run(b, exportertest.FreeAddr(b), "--collector.napi.softirq", "--collector.monitor.xmit", "--collector.drop")
	progs := exporterPrograms(b)
	if len(progs) == 0 {
		b.Fatal("no tracepoint program of the exporter found attached")
	}

	scenarios := []lab.Scenario{lab.Drop, lab.Pass, lab.TX, lab.Redirect, lab.Linux, lab.NoSocket}
	total := map[lab.Scenario]*eventAcc{}
	for _, sc := range scenarios {
		total[sc] = &eventAcc{ours: map[string]progCount{}, empty: map[string]progCount{}}
	}
	for b.Loop() {
		for _, sc := range scenarios {
			total[sc].run(b, lb, sc, progs)
		}
	}

	var out strings.Builder
	fmt.Fprintf(&out, "%-9s %-16s %-24s %12s %10s %10s %10s %10s\n",
		"scenario", "program", "tracepoint", "events/frame", "ns/event", "empty ns", "marginal", "ns/frame")
	for _, sc := range scenarios {
		a := total[sc]
		var perFrame, perFrameDefault float64
		for _, p := range progs {
			o, e := a.ours[p.name], a.empty[p.name]
			if o.runs == 0 {
				fmt.Fprintf(&out, "%-9s %-16s %-24s %12s\n", sc, p.name, p.tracepoint, "0")
				continue
			}
			nsEvent := float64(o.ns) / float64(o.runs)
			emptyEvent := float64(e.ns) / float64(max(e.runs, 1))
			marginal := nsEvent - emptyEvent
			events := float64(o.runs) / float64(a.frames)
			perFrame += events * marginal
			if defaultProgram[p.name] {
				perFrameDefault += events * marginal
			}
			fmt.Fprintf(&out, "%-9s %-16s %-24s %12.5f %10.1f %10.1f %10.1f %10.3f\n",
				sc, p.name, p.tracepoint, events, nsEvent, emptyEvent, marginal, events*marginal)
			b.ReportMetric(marginal, "ns/event_"+string(sc)+"_"+p.name)
		}
		fmt.Fprintf(&out, "%-9s default set %.3f ns/frame: %.2f%% of the budget at 4 Mpps (250 ns), %.2f%% at 25 Mpps (40 ns); with the opt-in programs %.3f ns/frame\n",
			sc, perFrameDefault, perFrameDefault/250*100, perFrameDefault/40*100, perFrame)
	}
	b.Logf("%d frames per scenario\n%s", total[lab.Drop].frames, out.String())
}
