package collector

import (
	"context"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/procfs"

	"github.com/xdp-exporter/xdp_exporter/bpf/napi"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// napiLab is a veth pair whose DUT end has an XDP_DROP program (veth runs
// NAPI only with XDP attached) and a loaded traffic generator.
type napiLab struct {
	pair *vethns.Pair
	gen  *trafficgen.Generator
}

func newNapiLab(t testing.TB) *napiLab {
	t.Helper()
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdict(t, pair, xdptest.Drop)
	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the traffic generator")
	t.Cleanup(func() { g.Close() })
	return &napiLab{pair: pair, gen: g}
}

// send sends at least n frames from the given CPUs and returns the number
// the generator's program counted: BPF_PROG_RUN restarts a batch that a
// signal interrupted, so a few more may go out.
func (l *napiLab) send(t testing.TB, n uint64, cpus ...int) uint64 {
	t.Helper()
	return l.run(t, n, false, cpus)
}

// flood is send letting the device lose what its ring cannot take.
func (l *napiLab) flood(t testing.TB, n uint64, cpus ...int) uint64 {
	t.Helper()
	return l.run(t, n, true, cpus)
}

func (l *napiLab) run(t testing.TB, n uint64, mayLose bool, cpus []int) uint64 {
	t.Helper()
	sent, err := l.gen.Run(context.Background(), trafficgen.Config{
		NS: l.pair.NS, Ifindex: l.pair.Peer.Index,
		SrcMAC: l.pair.Peer.HardwareAddr, DstMAC: l.pair.Host.HardwareAddr,
		Count: n, CPUs: cpus, MayLose: mayLose,
	})
	if err != nil {
		t.Fatal(err)
	}
	if sent < n {
		t.Fatalf("generator sent %d frames, want at least %d", sent, n)
	}
	return sent
}

// xdpDrops is veth's own count of frames its XDP program dropped, summed
// over RX queues: the packets its NAPI polls delivered to XDP.
func (l *napiLab) xdpDrops(t testing.TB) uint64 {
	t.Helper()
	stats := vethtest.EthtoolS(t, "", l.pair.Host.Name)
	return stats["rx_queue_0_xdp_drops"] + stats["rx_queue_1_xdp_drops"]
}

func newTestNapi(t testing.TB, cfg NapiConfig) *napiCollector {
	t.Helper()
	testenv.Privileged(t)
	c, err := loadNapiCollector(cfg, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "loading the napi collector")
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	return c
}

// polls is one device's histogram in one context.
type polls struct {
	count, work uint64
	byWork      [napi.MaxWork + 1]uint64 // de-cumulated buckets
	exhausted   uint64
}

// devicePolls reads the histogram series of device in the exporter's
// namespace, by context, checking the exposition's internal consistency.
func devicePolls(t testing.TB, mfs exportertest.Families, device string) map[string]polls {
	t.Helper()
	out := map[string]polls{}
	for _, m := range mfs["xdp_napi_poll_work"].GetMetric() {
		if !exportertest.Matches(m, "device", device) {
			continue
		}
		var ctxName string
		for _, lp := range m.GetLabel() {
			if lp.GetName() == "context" {
				ctxName = lp.GetValue()
			}
		}
		h := m.GetHistogram()
		p := polls{count: h.GetSampleCount(), work: uint64(h.GetSampleSum())}
		if len(h.GetBucket()) != napi.MaxWork+1 {
			t.Fatalf("%s/%s: %d buckets, want %d", device, ctxName, len(h.GetBucket()), napi.MaxWork+1)
		}
		var prev, weighted uint64
		for i, b := range h.GetBucket() {
			if b.GetUpperBound() != float64(i) || b.GetCumulativeCount() < prev {
				t.Fatalf("%s/%s: bucket %d is le=%v cumulative %d after %d", device, ctxName, i, b.GetUpperBound(), b.GetCumulativeCount(), prev)
			}
			p.byWork[i] = b.GetCumulativeCount() - prev
			weighted += uint64(i) * p.byWork[i]
			prev = b.GetCumulativeCount()
		}
		// veth's budget is 64, so no poll can land above the last bucket
		// and the sum must be exactly what the buckets say.
		if prev != p.count || weighted != p.work {
			t.Fatalf("%s/%s: buckets hold %d polls / %d packets, count=%d sum=%d", device, ctxName, prev, weighted, p.count, p.work)
		}
		p.exhausted = uint64(mfs.Value(t, "xdp_napi_polls_budget_exhausted_total", "device", device, "context", ctxName))
		if over := mfs.Value(t, "xdp_napi_polls_over_budget_total", "device", device, "context", ctxName); over != 0 {
			t.Errorf("%s/%s: %v polls over budget on veth", device, ctxName, over)
		}
		out[ctxName] = p
	}
	return out
}

func totalWork(byCtx map[string]polls) (work, count uint64) {
	for _, p := range byCtx {
		work += p.work
		count += p.count
	}
	return work, count
}

// waitWork reads device's histogram until it holds want packets: the last
// frames may still be in a NAPI poll deferred to ksoftirqd or a NAPI
// thread when the generator returns. read is one scrape; the last one is
// returned.
func waitWork(t testing.TB, read func() exportertest.Families, device string, want func() uint64) exportertest.Families {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		w := want()
		mfs := read()
		if work, _ := totalWork(devicePolls(t, mfs, device)); work >= w || time.Now().After(deadline) {
			return mfs
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func exactly(n uint64) func() uint64 { return func() uint64 { return n } }

// procSoftirqs reads /proc/softirqs.
func procSoftirqs(t testing.TB) procfs.Softirqs {
	t.Helper()
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		t.Fatal(err)
	}
	s, err := fs.Softirqs()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func softirqValue(t testing.TB, mfs exportertest.Families, name string, cpu int, vector string) float64 {
	t.Helper()
	return mfs.Value(t, name, "cpu", strconv.Itoa(cpu), "vector", vector)
}

// TestNapiPollHistogram sends N frames over both RX queues of a veth pair
// and checks that the histogram's total work for the device is exactly N,
// as veth's own XDP counters say, and that the softirq counters agree with
// the NAPI polls and with /proc/softirqs.
func TestNapiPollHistogram(t *testing.T) {
	lab := newNapiLab(t)
	c := newTestNapi(t, NapiConfig{Softirq: true})
	dev := lab.pair.Host.Name

	proc0 := procSoftirqs(t)
	before := gather(t, c)
	proc1 := procSoftirqs(t)
	if got := devicePolls(t, before, dev); len(got) != 0 {
		t.Fatalf("new device %s already has polls: %+v", dev, got)
	}

	const n = 200_000
	start := time.Now()
	sent := lab.send(t, n, 0, 1)
	after := waitWork(t, func() exportertest.Families { return gather(t, c) }, dev, exactly(sent))
	elapsed := time.Since(start)
	proc2 := procSoftirqs(t)
	afterAgain := gather(t, c)
	proc3 := procSoftirqs(t)
	raiseMisses := after.Value(t, "xdp_napi_program_recursion_misses_total", "tracepoint", "irq:softirq_raise") -
		before.Value(t, "xdp_napi_program_recursion_misses_total", "tracepoint", "irq:softirq_raise")

	byCtx := devicePolls(t, after, dev)
	work, count := totalWork(byCtx)
	if work != sent {
		t.Fatalf("histogram total work for %s = %d, want the %d frames sent (by context: %+v)", dev, work, sent, byCtx)
	}
	if drops := lab.xdpDrops(t); drops != sent {
		t.Fatalf("veth counted %d XDP drops, want the %d frames sent", drops, sent)
	}
	// Nothing here runs threaded NAPI or busy polling: every poll ran in
	// a NET_RX softirq, in the sender's task, in ksoftirqd or on idle.
	if p := byCtx["threaded"]; p.count != 0 {
		t.Errorf("%d polls in context threaded without threaded NAPI", p.count)
	}
	var completed uint64
	for ctxName, p := range byCtx {
		// veth's budget is 64: a poll with work 64 exhausted it.
		if p.exhausted != p.byWork[napi.MaxWork] {
			t.Errorf("%s: %d polls exhausted the budget, but %d did 64 packets", ctxName, p.exhausted, p.byWork[napi.MaxWork])
		}
		completed += p.count - p.exhausted
	}
	t.Logf("%d packets in %d polls (average bulk %.1f), by context: %v", work, count, float64(work)/float64(count), summary(byCtx))

	checkNetRxRaises(t, before, after, elapsed, float64(completed)-raiseMisses)

	entryMisses := afterAgain.Value(t, "xdp_napi_program_recursion_misses_total", "tracepoint", "irq:softirq_entry") -
		before.Value(t, "xdp_napi_program_recursion_misses_total", "tracepoint", "irq:softirq_entry")
	checkEntriesAgainstProc(t, before, afterAgain, entryMisses, [4]procfs.Softirqs{proc0, proc1, proc2, proc3})
}

// checkNetRxRaises checks the softirq counters of CPUs 0 and 1 over a run
// of elapsed: NET_RX ran and took time, and was raised at least minRaises
// times. A NAPI poll that did less than its budget completes the NAPI;
// the next poll needs a new napi_schedule, which raises NET_RX on that
// CPU. Raises of other devices only add, so the sum over CPUs bounds the
// completed polls from above (plus raises the program could not count
// because it was already running on that CPU, taken off minRaises).
func checkNetRxRaises(t *testing.T, before, after exportertest.Families, elapsed time.Duration, minRaises float64) {
	t.Helper()
	var raises float64
	for cpu := 0; cpu < 2; cpu++ {
		dRaise := softirqValue(t, after, "xdp_napi_softirq_raises_total", cpu, "NET_RX") - softirqValueOr0(before, "xdp_napi_softirq_raises_total", cpu, "NET_RX")
		dEntry := softirqValue(t, after, "xdp_napi_softirq_entries_total", cpu, "NET_RX") - softirqValueOr0(before, "xdp_napi_softirq_entries_total", cpu, "NET_RX")
		dSec := softirqValue(t, after, "xdp_napi_softirq_seconds_total", cpu, "NET_RX") - softirqValueOr0(before, "xdp_napi_softirq_seconds_total", cpu, "NET_RX")
		raises += dRaise
		if dEntry < 1 || dSec <= 0 || dSec > elapsed.Seconds() {
			t.Errorf("CPU %d NET_RX: %v entries, %vs in softirq during a %v run", cpu, dEntry, dSec, elapsed)
		}
		t.Logf("CPU %d NET_RX: %v raises, %v entries, %.3fs in softirq (run %v)", cpu, dRaise, dEntry, dSec, elapsed)
	}
	if raises < minRaises {
		t.Errorf("NET_RX raises %v < %v polls that completed (less the raises missed)", raises, minRaises)
	}
}

// checkEntriesAgainstProc compares the entries counted between two reads
// with /proc/softirqs read around them (proc[0] and proc[3] outside,
// proc[1] and proc[2] inside). The kernel increments /proc/softirqs right
// before the entry tracepoint, so our delta is sandwiched between the
// deltas of /proc/softirqs read just inside and just outside our two
// reads. The increment and the tracepoint are two steps, and at most one
// softirq per CPU can sit between them when we read (a stalled vCPU can
// hold it there for a while): hence the one-event slack on each side.
func checkEntriesAgainstProc(t *testing.T, before, after exportertest.Families, misses float64, proc [4]procfs.Softirqs) {
	t.Helper()
	for cpu := 0; cpu < 2; cpu++ {
		for _, v := range []struct {
			name string
			col  func(procfs.Softirqs) []uint64
		}{
			{"NET_RX", func(s procfs.Softirqs) []uint64 { return s.NetRx }},
			{"TIMER", func(s procfs.Softirqs) []uint64 { return s.Timer }},
		} {
			ours := softirqValue(t, after, "xdp_napi_softirq_entries_total", cpu, v.name) - softirqValueOr0(before, "xdp_napi_softirq_entries_total", cpu, v.name)
			inner := float64(v.col(proc[2])[cpu] - v.col(proc[1])[cpu])
			outer := float64(v.col(proc[3])[cpu] - v.col(proc[0])[cpu])
			if ours+misses+1 < inner || ours > outer+1 {
				t.Errorf("CPU %d %s: %v entries counted (+%v missed), /proc/softirqs says between %v and %v", cpu, v.name, ours, misses, inner, outer)
			}
		}
	}
}

// softirqValueOr0 is softirqValue for a CPU that may not have appeared yet.
func softirqValueOr0(mfs exportertest.Families, name string, cpu int, vector string) float64 {
	for _, m := range mfs[name].GetMetric() {
		if exportertest.Matches(m, "cpu", strconv.Itoa(cpu), "vector", vector) {
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func summary(byCtx map[string]polls) map[string]string {
	out := map[string]string{}
	for k, p := range byCtx {
		out[k] = strconv.FormatUint(p.count, 10) + " polls/" + strconv.FormatUint(p.work, 10) + " packets"
	}
	return out
}

// TestNapiThreadedContext switches the device to threaded NAPI: every poll
// must then be labelled threaded, and still count every packet.
func TestNapiThreadedContext(t *testing.T) {
	if testenv.KernelBefore(t, 5, 12) {
		t.Skip("threaded NAPI (/sys/class/net/DEV/threaded) came with Linux 5.12: no poll runs in that context here")
	}
	lab := newNapiLab(t)
	c := newTestNapi(t, NapiConfig{})
	dev := lab.pair.Host.Name
	err := os.WriteFile("/sys/class/net/"+dev+"/threaded", []byte("1"), 0)
	testenv.Check(t, err, "enabling threaded NAPI on veth")

	// A NAPI thread drains the ring more slowly than the generator fills
	// it, so veth drops some frames at transmit: the truth is what its XDP
	// program saw.
	const n = 100_000
	lab.flood(t, n, 0, 1)
	byCtx := devicePolls(t, waitWork(t, func() exportertest.Families { return gather(t, c) }, dev,
		func() uint64 { return lab.xdpDrops(t) }), dev)
	delivered := lab.xdpDrops(t)
	if p := byCtx["threaded"]; p.work != delivered || len(byCtx) != 1 || delivered == 0 {
		t.Fatalf("threaded NAPI: want all %d delivered packets in context threaded, got %v", delivered, summary(byCtx))
	}
	t.Logf("threaded NAPI delivered %d of %d frames: %v", delivered, n, summary(byCtx))
}

// TestNapiMissingTracepoint points the raise program at a tracepoint no
// kernel has: the collector still loads, the poll histogram and the other
// softirq counters keep working, only raises disappear, and each scrape
// reports the collector unsupported in part (not failed) with an error
// naming the tracepoint.
func TestNapiMissingTracepoint(t *testing.T) {
	lab := newNapiLab(t)
	spec, err := napi.Spec()
	if err != nil {
		t.Fatal(err)
	}
	spec.Programs[napi.NapiProgSoftirqRaise].AttachTo = "xdp_exporter_no_such_tracepoint"
	const missing = "irq:xdp_exporter_no_such_tracepoint"
	c, err := newNapiCollector(NapiConfig{Softirq: true}, slog.New(slog.DiscardHandler), spec)
	if err != nil {
		t.Fatalf("one missing tracepoint failed the whole collector: %v", err)
	}
	defer c.Close()

	const n = 10_000
	sent := lab.send(t, n, 0)
	var updateErr error
	mfs := waitWork(t, func() exportertest.Families {
		var mfs exportertest.Families
		mfs, updateErr = gatherErr(t, c)
		return mfs
	}, lab.pair.Host.Name, exactly(sent))
	if !unsupportedOnly(updateErr) || !strings.Contains(updateErr.Error(), missing) {
		t.Fatalf("Update error = %v, want unsupported alone, naming %s", updateErr, missing)
	}
	if work, _ := totalWork(devicePolls(t, mfs, lab.pair.Host.Name)); work != sent {
		t.Errorf("histogram work = %d, want the %d frames sent", work, sent)
	}
	if mfs.Value(t, "xdp_napi_tracepoint_attached", "tracepoint", missing) != 0 ||
		mfs.Value(t, "xdp_napi_tracepoint_attached", "tracepoint", "irq:softirq_entry") != 1 {
		t.Error("xdp_napi_tracepoint_attached does not show which tracepoint is missing")
	}
	if _, ok := mfs["xdp_napi_softirq_raises_total"]; ok {
		t.Error("raises reported without their tracepoint")
	}
	if softirqValue(t, mfs, "xdp_napi_softirq_entries_total", 0, "NET_RX") == 0 {
		t.Error("softirq entries stopped with the raise tracepoint missing")
	}

	// Through the scrape machinery (whose Describe is unchecked, so not a
	// pedantic registry): success 1, unsupported 1, metrics kept.
	reg := prometheus.NewRegistry()
	reg.MustRegister(NewSet(map[string]Collector{"napi": c}, slog.New(slog.DiscardHandler)).Scrape(context.Background()))
	scraped, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	byName := exportertest.Families{}
	for _, mf := range scraped {
		byName[mf.GetName()] = mf
	}
	if byName.Value(t, "xdp_scrape_collector_success", "collector", "napi") != 1 ||
		byName.Value(t, "xdp_scrape_collector_unsupported", "collector", "napi") != 1 {
		t.Error("a tracepoint this kernel lacks is not reported as unsupported (success 1, unsupported 1)")
	}
	if _, ok := byName["xdp_napi_poll_work"]; !ok {
		t.Error("the scrape dropped the histogram of a partially attached collector")
	}

	// With every tracepoint missing the constructor itself fails.
	for _, p := range spec.Programs {
		p.AttachTo = "xdp_exporter_no_such_tracepoint"
	}
	if c, err := newNapiCollector(NapiConfig{Softirq: true}, slog.New(slog.DiscardHandler), spec); !unsupportedOnly(err) {
		if c != nil {
			c.Close()
		}
		t.Fatalf("with no tracepoint in the kernel: %v, want unsupported", err)
	}
}

func TestNapiConfig(t *testing.T) {
	if _, err := newNapiCollector(NapiConfig{SoftirqVectors: []string{"NET_RX", "BOGUS"}}, slog.New(slog.DiscardHandler), nil); err == nil {
		t.Fatal("unknown softirq vector accepted")
	}
}

// TestNapiVectorSubset checks that --collector.napi.softirq-vectors bounds
// the exported series.
func TestNapiVectorSubset(t *testing.T) {
	c := newTestNapi(t, NapiConfig{Softirq: true, SoftirqVectors: []string{"NET_RX", "TIMER"}})
	time.Sleep(20 * time.Millisecond) // let timer softirqs happen on every CPU
	mfs := gather(t, c)
	for _, m := range mfs["xdp_napi_softirq_entries_total"].GetMetric() {
		if !exportertest.Matches(m, "vector", "NET_RX") && !exportertest.Matches(m, "vector", "TIMER") {
			t.Fatalf("vector outside the subset exported: %v", m.GetLabel())
		}
	}
}

// TestNapiSoftirqOptIn builds the napi collector from its flags as the
// exporter does and asks the kernel which tracing links our process holds:
// by default only napi_poll is attached; --collector.napi.softirq adds the
// three softirq programs.
func TestNapiSoftirqOptIn(t *testing.T) {
	testenv.Privileged(t)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{nil, []string{"napi_poll"}},
		{[]string{"--collector.napi.softirq"}, []string{"napi_poll", "softirq_entry", "softirq_exit", "softirq_raise"}},
	} {
		if added := linksAddedBy(t, "napi", tc.args); !slices.Equal(added, tc.want) {
			t.Errorf("flags %q attached %q, want %q", tc.args, added, tc.want)
		}
	}
}
