package kernelmatrix

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xdpdispatch"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// sizedObject is the user's own program, as iproute2 loads it.
const sizedObject = "../bpf/xdptest/sized_bpfel.o"

// TestRxqObserve runs the real exporter with --collector.rxq.observe beside
// a program a user attached with iproute2 that passes short frames and
// drops longer ones. Where the kernel has BPF trampolines, the counts by
// queue x CPU x verdict equal what was sent; after the user replaces the
// program, the new one is counted, the counts go on, and no fexit link is
// left on the old program. Where the kernel refuses tracing programs, the
// program is reported unobservable with the kernel's reason, logged once
// at INFO, and the collector does not fail.
func TestRxqObserve(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	dut := pair.Host.Name
	e := runObserving(t, dut)
	// Attached after the exporter started: the next scrape finds it.
	first := vethtest.AttachWithIP(t, dut, sizedObject, "xdp")
	mfs := scrapeSucceeded(t, e, "rxq")
	if _, n := mfs.Sum("xdp_rxq_unobservable_info", "device", dut, "prog_id", fmt.Sprint(first)); n == 1 {
		checkUnobservable(t, e, mfs, dut, first)
		return
	}
	t.Run("counted", func(t *testing.T) {
		checkObserved(t, mfs, dut, first)
		pass, drop := uint64(frames), uint64(frames/2)
		dropSize := int(xdptest.SizedSizedSIZED_DROP_FROM)
		vethtest.SendExactly(t, pair, pass)
		vethtest.SendSized(t, pair, drop, dropSize)
		checkCells(t, exportertest.Parse(t, e.Scrape(t)), dut, pass/2, drop/2, dropSize)

		second := vethtest.AttachWithIP(t, dut, sizedObject, "xdp")
		if second == first {
			t.Fatalf("ip kept program %d", first)
		}
		mfs := exportertest.Parse(t, e.Scrape(t))
		checkObserved(t, mfs, dut, second)
		// The replaced program lives on only while something holds it: an
		// fexit link left behind would.
		if p, err := ebpf.NewProgramFromID(ebpf.ProgramID(first)); err == nil {
			p.Close()
			t.Errorf("the replaced program %d is still loaded; observer links: %v", first, vethtest.ObserverLinks(t))
		}
		vethtest.SendExactly(t, pair, pass)
		checkCells(t, exportertest.Parse(t, e.Scrape(t)), dut, pass, drop/2, dropSize)
		if links := vethtest.ObserverLinks(t); len(links) != 1 || links[0].Target != 0 && links[0].Target != second {
			t.Errorf("observer links %+v, want one on program %d", links, second)
		}
		e.Stop(t)
		if links := vethtest.ObserverLinks(t); len(links) > 0 {
			t.Errorf("observer links %+v outlive the exporter", links)
		}
		if id := vethtest.AttachedXDP(t, dut); id != second {
			t.Errorf("after the exporter stopped %s holds program %d, want the user's %d", dut, id, second)
		}
	})
}

// checkUnobservable: the kernel refused to trace the program.
func checkUnobservable(t *testing.T, e *exportertest.Process, mfs exportertest.Families, dut string, prog uint32) {
	t.Helper()
	reasons := 0
	for _, reason := range []string{"not_permitted", "not_supported"} {
		_, n := mfs.Sum("xdp_rxq_unobservable_info", "device", dut, "prog_id", fmt.Sprint(prog), "reason", reason)
		reasons += n
	}
	if reasons != 1 {
		t.Errorf("program %d is unobservable for a reason other than the kernel's refusal; scrape:\n%s", prog, e.Scrape(t))
	}
	e.Scrape(t)
	e.Stop(t)
	log := e.Stderr.String()
	if n := strings.Count(log, `msg="XDP program cannot be observed`); n != 1 {
		t.Errorf("logged the unobservable program %d times, want once:\n%s", n, log)
	}
	if strings.Contains(log, "level=ERROR") {
		t.Errorf("the exporter logged an error:\n%s", log)
	}
	t.Logf("this kernel cannot observe XDP programs: %s", log[strings.Index(log, `msg="XDP program cannot be observed`):])
}

func checkObserved(t *testing.T, mfs exportertest.Families, dut string, prog uint32) {
	t.Helper()
	if v, n := mfs.Sum("xdp_rxq_observed_info", "device", dut); n != 1 || v != 1 {
		t.Errorf("%d xdp_rxq_observed_info series for %s, want one", n, dut)
	}
	if _, n := mfs.Sum("xdp_rxq_observed_info", "device", dut, "attach_mode", "native", "prog_id", fmt.Sprint(prog)); n != 1 {
		t.Errorf("xdp_rxq_observed_info does not name program %d in native mode", prog)
	}
}

// checkCells: each queue ran on the CPU of its number (veth runs NAPI on
// the sending CPU) with pass packets passed and drop dropped, and nothing
// else.
func checkCells(t *testing.T, mfs exportertest.Families, dut string, pass, drop uint64, dropSize int) {
	t.Helper()
	checkVerdicts(t, mfs, "xdp_rxq", []string{"device", dut}, pass, drop, dropSize)
}

// checkVerdicts is checkCells for the families prefix_packets_total and
// prefix_bytes_total, on the series that have labels.
func checkVerdicts(t *testing.T, mfs exportertest.Families, prefix string, labels []string, pass, drop uint64, dropSize int) {
	t.Helper()
	for q := range 2 {
		queue := fmt.Sprint(q)
		for _, c := range []struct {
			action string
			n      uint64
			size   int
		}{{"pass", pass, trafficgen.MinFrameSize}, {"drop", drop, dropSize}} {
			cell := append(slices.Clone(labels), "queue", queue, "cpu", queue, "action", c.action)
			got, _ := mfs.Sum(prefix+"_packets_total", cell...)
			bytes, _ := mfs.Sum(prefix+"_bytes_total", cell...)
			if got != float64(c.n) || bytes != float64(c.n)*float64(c.size) {
				t.Errorf("%v queue %d CPU %d %s: %v packets, %v bytes; want %d of %d bytes", labels, q, q, c.action, got, bytes, c.n, c.size)
			}
		}
	}
	if total, _ := mfs.Sum(prefix+"_packets_total", labels...); total != float64(2*(pass+drop)) {
		t.Errorf("%s_packets_total %v sums to %v, want %d", prefix, labels, total, 2*(pass+drop))
	}
}

// TestRxqObserveComponents runs the real exporter with observe mode and
// the bpf collector, then a user loads a program with xdp-loader. Where
// the kernel runs libxdp's dispatcher, the user adds a second and later
// removes the first: the bpf collector lists the dispatcher's components
// by slot as libxdp pinned them, each component's verdicts by queue x CPU
// equal what it was sent (the second sees what the first passed on), the
// dispatcher's final verdicts are counted where the kernel allows a
// trampoline on it, and after the removal the component is gone at the
// next scrape with no fexit left on it, the other's counts going on.
// Where libxdp loads the program alone, no component is listed.
func TestRxqObserveComponents(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	dut := pair.Host.Name
	e := runObserving(t, dut, "bpf")
	t.Cleanup(func() { _ = exec.Command("xdp-loader", "unload", "--all", dut).Run() })
	xdpLoader(t, "load", "-m", "native", dut, sizedObject)
	mfs := scrapeSucceeded(t, e, "bpf", "rxq")
	if name := progName(t, vethtest.AttachedXDP(t, dut)); name != xdpdispatch.Name {
		if _, n := mfs.Sum("xdp_bpf_dispatcher_component_info"); n != 0 {
			t.Errorf("program %q alone, yet %d components listed", name, n)
		}
		t.Logf("libxdp loaded %q alone: this kernel does not run its dispatcher", name)
		return
	}
	if _, n := mfs.Sum("xdp_rxq_unobservable_info", "device", dut, "reason", "not_permitted"); n > 0 {
		t.Logf("this kernel refuses tracing programs; the components are unobservable:\n%s", e.Scrape(t))
		return
	}
	t.Run("counted", func(t *testing.T) {
		xdpLoader(t, "load", "-m", "native", dut, sizedObject)
		mfs := exportertest.Parse(t, e.Scrape(t))
		comps := checkComponents(t, mfs, pair.Host.Index, dut, 2)
		const n = frames
		dropSize := int(xdptest.SizedSizedSIZED_DROP_FROM)
		vethtest.SendExactly(t, pair, n)
		vethtest.SendSized(t, pair, n, dropSize)
		mfs = exportertest.Parse(t, e.Scrape(t))
		checkComponentCells(t, mfs, dut, comps[0], n/2, n/2, dropSize)
		checkComponentCells(t, mfs, dut, comps[1], n/2, 0, dropSize)
		if _, observed := mfs.Sum("xdp_rxq_observed_info", "device", dut); observed == 1 {
			checkCells(t, mfs, dut, n/2, n/2, dropSize)
		} else {
			t.Logf("the kernel puts no trampoline on the dispatcher of two components:\n%v", mfs.Values("xdp_rxq_unobservable_info", "reason"))
		}

		xdpLoader(t, "unload", "--id", comps[0], dut)
		mfs = exportertest.Parse(t, e.Scrape(t))
		if got := checkComponents(t, mfs, pair.Host.Index, dut, 1); got[0] != comps[1] {
			t.Errorf("after removing %s the component is %s, want %s", comps[0], got[0], comps[1])
		}
		if _, left := mfs.Sum("xdp_rxq_component_packets_total", "prog_id", comps[0]); left != 0 {
			t.Errorf("the removed component %s still has %d series", comps[0], left)
		}
		checkComponentCells(t, mfs, dut, comps[1], n/2, 0, dropSize)
		id, _ := strconv.Atoi(comps[0])
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
			if err != nil {
				break
			}
			p.Close()
			if time.Now().After(deadline) {
				t.Fatalf("the removed component %d is still loaded 5 s on; observer links: %v", id, vethtest.ObserverLinks(t))
			}
		}
		e.Stop(t)
		if links := vethtest.ObserverLinks(t); len(links) > 0 {
			t.Errorf("observer links %+v outlive the exporter", links)
		}
		if strings.Contains(e.Stderr.String(), "level=ERROR") {
			t.Errorf("the exporter logged an error:\n%s", e.Stderr)
		}
	})
}

// runObserving runs the real exporter with observe mode on dut and the
// collectors also, and no other.
func runObserving(t *testing.T, dut string, also ...string) *exportertest.Process {
	t.Helper()
	args := []string{"--collector.disable-defaults", "--collector.rxq", "--collector.rxq.observe", "--collector.rxq.device=" + dut}
	for _, c := range also {
		args = append(args, "--collector."+c)
	}
	return exportertest.Run(t, exportertest.FreeAddr(t), args...)
}

// scrapeSucceeded scrapes e and fails the test unless each of collectors
// succeeded.
func scrapeSucceeded(t *testing.T, e *exportertest.Process, collectors ...string) exportertest.Families {
	t.Helper()
	mfs := exportertest.Parse(t, e.Scrape(t))
	for _, c := range collectors {
		if ok, _ := mfs.Sum("xdp_scrape_collector_success", "collector", c); ok != 1 {
			t.Fatalf("the %s collector failed; log:\n%s", c, e.Stderr)
		}
	}
	return mfs
}

// progName is the name of the loaded program with id.
func progName(t *testing.T, id uint32) string {
	t.Helper()
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(id))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	return info.Name
}

func xdpLoader(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("xdp-loader", args...).CombinedOutput(); err != nil {
		t.Fatalf("xdp-loader %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// checkComponents: the bpf collector lists n components of the
// dispatcher on dut, slots 0 to n-1, with libxdp's default priority and
// chain-call action, each the program libxdp pinned for its slot. It
// returns their program ids by slot.
func checkComponents(t *testing.T, mfs exportertest.Families, ifindex int, dut string, n int) []string {
	t.Helper()
	disp := vethtest.AttachedXDP(t, dut)
	var ids []string
	for slot := range n {
		pin, err := ebpf.LoadPinnedProgram(fmt.Sprintf("/sys/fs/bpf/xdp/dispatch-%d-%d/prog%d-prog", ifindex, disp, slot), nil)
		if err != nil {
			t.Fatalf("libxdp's pin of slot %d: %v", slot, err)
		}
		pi, err := pin.Info()
		pin.Close()
		if err != nil {
			t.Fatal(err)
		}
		id, _ := pi.ID()
		ids = append(ids, fmt.Sprint(id))
		if _, got := mfs.Sum("xdp_bpf_dispatcher_component_info", "device", dut, "dispatcher_id", fmt.Sprint(disp), "slot", fmt.Sprint(slot),
			"prog_id", ids[slot], "name", "xdp_sized", "priority", "50", "chain_call_actions", "pass"); got != 1 {
			t.Errorf("slot %d: no component series for program %s; listed: %v", slot, ids[slot], mfs.Values("xdp_bpf_dispatcher_component_info", "prog_id"))
		}
	}
	if _, got := mfs.Sum("xdp_bpf_dispatcher_component_info", "device", dut); got != n {
		t.Errorf("%d components listed on %s, want %d", got, dut, n)
	}
	return ids
}

// checkComponentCells: component prog returned pass and drop packets on
// each queue, on the CPU of its number, and nothing else.
func checkComponentCells(t *testing.T, mfs exportertest.Families, dut, prog string, pass, drop uint64, dropSize int) {
	t.Helper()
	checkVerdicts(t, mfs, "xdp_rxq_component", []string{"device", dut, "prog_id", prog}, pass, drop, dropSize)
}
