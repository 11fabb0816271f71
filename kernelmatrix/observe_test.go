package kernelmatrix

import (
	"fmt"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
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
	e := exportertest.Run(t, exportertest.FreeAddr(t), "--collector.disable-defaults",
		"--collector.rxq", "--collector.rxq.observe", "--collector.rxq.device="+dut)
	// Attached after the exporter started: the next scrape finds it.
	first := vethtest.AttachWithIP(t, dut, sizedObject, "xdp")
	mfs := exportertest.Parse(t, e.Scrape(t))
	if ok, _ := mfs.Sum("xdp_scrape_collector_success", "collector", "rxq"); ok != 1 {
		t.Fatalf("the rxq collector failed; log:\n%s", e.Stderr)
	}
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
	if _, n := mfs.Sum("xdp_rxq_observed_info", "device", dut, "mode", "native", "prog_id", fmt.Sprint(prog)); n != 1 {
		t.Errorf("xdp_rxq_observed_info does not name program %d in native mode", prog)
	}
}

// checkCells: each queue ran on the CPU of its number (veth runs NAPI on
// the sending CPU) with pass packets passed and drop dropped, and nothing
// else.
func checkCells(t *testing.T, mfs exportertest.Families, dut string, pass, drop uint64, dropSize int) {
	t.Helper()
	for q := range 2 {
		queue := fmt.Sprint(q)
		for _, c := range []struct {
			action string
			n      uint64
			size   int
		}{{"pass", pass, trafficgen.MinFrameSize}, {"drop", drop, dropSize}} {
			got, _ := mfs.Sum("xdp_rxq_packets_total", "device", dut, "queue", queue, "cpu", queue, "action", c.action)
			bytes, _ := mfs.Sum("xdp_rxq_bytes_total", "device", dut, "queue", queue, "cpu", queue, "action", c.action)
			if got != float64(c.n) || bytes != float64(c.n)*float64(c.size) {
				t.Errorf("queue %d CPU %d %s: %v packets, %v bytes; want %d of %d bytes", q, q, c.action, got, bytes, c.n, c.size)
			}
		}
	}
	if total, _ := mfs.Sum("xdp_rxq_packets_total", "device", dut); total != float64(2*(pass+drop)) {
		t.Errorf("xdp_rxq_packets_total for %s sums to %v, want %d", dut, total, 2*(pass+drop))
	}
}
