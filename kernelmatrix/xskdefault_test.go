package kernelmatrix

import (
	"bufio"
	"fmt"
	"io"
	"maps"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xdpdispatch"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// xskDefaultProg is the name of libxdp's default AF_XDP program.
const xskDefaultProg = "xsk_def_prog"

// TestXSKDefaultProgram runs an AF_XDP application bound with libxdp's
// defaults (testdata/xskrecv.c) on queue 1 of a veth with two RX queues,
// beside the real exporter in observe mode with the bpf and xsk
// collectors. libxdp puts its default program in front of the socket,
// inside its dispatcher where the kernel allows freplace, alone where it
// does not. Where the kernel has trampolines, that program's verdicts are
// counted as any component's: on queue 1 as many redirects as the
// application received by its own count, on queue 0, where no socket is
// bound, passes, and nothing else. Where the xsk collector is supported,
// the socket is listed beside them on queue 1, having dropped nothing.
// Where the kernel refuses tracing programs, the program is unobservable
// with the kernel's reason and nothing is logged at ERROR.
func TestXSKDefaultProgram(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	dut := pair.Host.Name
	app := buildXSKRecv(t)
	e := runObserving(t, dut, "bpf", "xsk")
	recv := startXSKRecv(t, app, dut, 1)
	mfs := scrapeSucceeded(t, e, "bpf", "rxq", "xsk")
	attached := vethtest.AttachedXDP(t, dut)
	// Alone, the program's verdicts are the device's (no prog_id label);
	// in the dispatcher, its component's.
	family, def := "xdp_rxq", fmt.Sprint(attached)
	cell := []string{"device", dut}
	if name := progName(t, attached); name == xdpdispatch.Name {
		comps := mfs.Series("xdp_bpf_dispatcher_component_info", "device", dut)
		if len(comps) != 1 || exportertest.Label(comps[0], "name") != xskDefaultProg {
			t.Fatalf("libxdp's dispatcher %d on %s: components %v, want %s alone", attached, dut, comps, xskDefaultProg)
		}
		family, def = "xdp_rxq_component", exportertest.Label(comps[0], "prog_id")
		cell = append(cell, "prog_id", def)
	} else if name != xskDefaultProg {
		t.Fatalf("%s holds program %d %q, not libxdp's default program", dut, attached, name)
	} else {
		t.Logf("libxdp loaded %s alone (no bpffs or no freplace here)", xskDefaultProg)
	}
	if _, n := mfs.Sum("xdp_rxq_unobservable_info", "device", dut, "prog_id", def); n == 1 {
		id, _ := strconv.ParseUint(def, 10, 32)
		checkUnobservable(t, e, mfs, dut, uint32(id))
		return
	}
	t.Run("counted", func(t *testing.T) {
		const n = 2_000 // fewer per queue than the fill ring holds: no drop even if the application lags
		vethtest.SendExactly(t, pair, n)
		mfs := exportertest.Parse(t, e.Scrape(t))
		received := recv.stop(t)
		cells := verdictCells(mfs, family+"_packets_total", cell...)
		want := map[string]float64{"1:1:redirect": n / 2, "0:0:pass": n / 2}
		if !maps.Equal(cells, want) {
			t.Errorf("%s of program %s by queue:cpu:verdict %v, want %v", family+"_packets_total", def, cells, want)
		}
		if received != n/2 || cells["1:1:redirect"] != float64(received) {
			t.Errorf("the application received %d frames, %d were sent to its queue; the exporter counted %v redirects",
				received, n/2, cells["1:1:redirect"])
		}
		checkXSKBeside(t, mfs, dut)
		e.Stop(t)
		if links := vethtest.ObserverLinks(t); len(links) > 0 {
			t.Errorf("observer links %+v outlive the exporter", links)
		}
		if strings.Contains(e.Stderr.String(), "level=ERROR") {
			t.Errorf("the exporter logged an error:\n%s", e.Stderr)
		}
	})
}

// checkXSKBeside: where the kernel has AF_XDP socket diag, the xsk
// collector lists the application's socket on queue 1 of dut with
// libxdp's default ring sizes and nothing dropped.
func checkXSKBeside(t *testing.T, mfs exportertest.Families, dut string) {
	t.Helper()
	if mfs.Values("xdp_scrape_collector_unsupported", "collector")["xsk"] == 1 {
		t.Logf("this kernel has no AF_XDP socket diag: no socket series")
		return
	}
	for _, ring := range []string{"rx", "fill", "completion"} {
		if got, n := mfs.Sum("xdp_xsk_ring_entries", "device", dut, "queue", "1", "ring", ring); n != 1 || got != 2048 {
			t.Errorf("xdp_xsk_ring_entries{device=%q,queue=\"1\",ring=%q}: %d series summing to %v, want one of libxdp's 2048", dut, ring, n, got)
		}
	}
	if dropped, n := mfs.Sum("xdp_xsk_rx_dropped_total", "device", dut, "queue", "1"); n != 1 || dropped != 0 {
		t.Errorf("xdp_xsk_rx_dropped_total on queue 1: %d series summing to %v, want one at 0", n, dropped)
	}
}

// verdictCells sums family's series with labels by queue:cpu:action.
func verdictCells(mfs exportertest.Families, family string, labels ...string) map[string]float64 {
	cells := map[string]float64{}
	for _, m := range mfs.Series(family, labels...) {
		cells[exportertest.Label(m, "queue")+":"+exportertest.Label(m, "cpu")+":"+exportertest.Label(m, "action")] += exportertest.Value(m)
	}
	return cells
}

// buildXSKRecv compiles testdata/xskrecv.c against the system's libxdp.
func buildXSKRecv(t *testing.T) string {
	t.Helper()
	out := filepath.Join(t.TempDir(), "xskrecv")
	if b, err := exec.Command("cc", "-O2", "-Wall", "-Werror", "-o", out, "testdata/xskrecv.c", "-lxdp").CombinedOutput(); err != nil {
		t.Fatalf("building the AF_XDP application (needs cc and libxdp-dev: make deps): %v\n%s", err, b)
	}
	return out
}

// xskRecv is a running xskrecv.
type xskRecv struct {
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	stdout *bufio.Reader
	stderr *strings.Builder
}

// startXSKRecv starts the application on queue of dev and waits until
// its socket is bound; it is killed when the test ends.
func startXSKRecv(t *testing.T, app, dev string, queue int) *xskRecv {
	t.Helper()
	r := &xskRecv{cmd: exec.Command(app, dev, fmt.Sprint(queue)), stderr: &strings.Builder{}}
	r.cmd.Stderr = r.stderr
	var err error
	if r.stdin, err = r.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	out, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.stdout = bufio.NewReader(out)
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if r.cmd.ProcessState == nil {
			_ = r.cmd.Process.Kill()
			_ = r.cmd.Wait()
		}
	})
	ready := make(chan string, 1)
	go func() { line, _ := r.stdout.ReadString('\n'); ready <- line }()
	select {
	case line := <-ready:
		if line != "ready\n" {
			_ = r.cmd.Wait()
			t.Fatalf("xskrecv %s %d did not start: %q\n%s", dev, queue, line, r.stderr)
		}
	case <-time.After(time.Minute):
		t.Fatalf("xskrecv %s %d not ready after a minute:\n%s", dev, queue, r.stderr)
	}
	return r
}

// stop closes the application's input, which ends it, and returns the
// frames it received.
func (r *xskRecv) stop(t *testing.T) uint64 {
	t.Helper()
	r.stdin.Close()
	rest, _ := io.ReadAll(r.stdout)
	if err := r.cmd.Wait(); err != nil {
		t.Fatalf("xskrecv: %v\n%s", err, r.stderr)
	}
	var n uint64
	if _, err := fmt.Sscanf(string(rest), "received %d\n", &n); err != nil {
		t.Fatalf("xskrecv printed %q: %v", rest, err)
	}
	return n
}
