package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// startXDPWrapped is startExporter with the binary run through a wrapper
// command (capsh), which must exec it so that SIGINT reaches the exporter.
func startXDPWrapped(t *testing.T, wrapper []string, args ...string) *exporter {
	t.Helper()
	addr := exportertest.FreeAddr(t)
	cmdline := append(append(wrapper, exportertest.Build(t), "--web.listen-address="+addr), args...)
	return exportertest.Start(t, addr, exec.Command(cmdline[0], cmdline[1:]...))
}

func xdpHasLine(body, line string) bool {
	for _, l := range strings.Split(body, "\n") {
		if l == line {
			return true
		}
	}
	return false
}

// TestXDPWithoutBPFCapabilities runs the exporter with CAP_BPF,
// CAP_PERFMON and CAP_SYS_ADMIN dropped: the monitor collector reports success
// 0 and says why in one log line, and the exporter keeps serving.
func TestXDPWithoutBPFCapabilities(t *testing.T) {
	testenv.Privileged(t)
	capsh, err := exec.LookPath("capsh")
	if err != nil {
		testenv.Unavailable(t, "capsh not installed (apt-get install libcap2-bin)")
		return
	}
	// --drop removes the capabilities from the bounding set; capsh then
	// execs the exporter through a shell with the remaining ones.
	e := startXDPWrapped(t, []string{capsh, "--drop=cap_bpf,cap_perfmon,cap_sys_admin", "--", "-c", `exec "$0" "$@"`})
	body := e.Scrape(t)
	promtest.CheckMetrics(t, body)
	if !xdpHasLine(body, `xdp_scrape_collector_success{collector="monitor"} 0`) {
		t.Fatalf("monitor collector did not report success 0 without CAP_BPF:\n%s", body)
	}
	if !strings.Contains(e.Stderr.String(), "BPF not permitted for the monitor collector: missing CAP_BPF and CAP_PERFMON (or CAP_SYS_ADMIN)") {
		t.Fatalf("no clear log line about the missing capability:\n%s", e.Stderr)
	}
	if !strings.Contains(body, "process_open_fds") {
		t.Fatal("the exporter stopped serving its other metrics")
	}
}

// TestXDPKernelDrift is the failure that stops every tool of Debian's
// xdp-tools 1.3.1 on recent kernels: one of the programs targets
// xdp:xdp_redirect_map_err, which recent kernels (6.18 here) no longer
// have. Where the running kernel lacks it (its BTF has no
// btf_trace_xdp_redirect_map_err, the exporter's own probe), ours reports
// it missing once at startup and serves everything else; where it has it
// (6.12 in the kernel matrix), the program on it is attached.
func TestXDPKernelDrift(t *testing.T) {
	testenv.Privileged(t)
	kernel, err := btf.LoadKernelSpec()
	if err != nil {
		t.Fatal(err)
	}
	_, err = kernel.AnyTypeByName("btf_trace_xdp_redirect_map_err")
	present := err == nil
	e := startExporter(t)
	body := e.Scrape(t)
	mapErr := `xdp_monitor_tracepoint_attached{tracepoint="xdp:xdp_redirect_map_err"} 0`
	if present {
		mapErr = `xdp_monitor_tracepoint_attached{tracepoint="xdp:xdp_redirect_map_err"} 1`
	}
	for _, want := range []string{
		`xdp_scrape_collector_success{collector="monitor"} 1`,
		mapErr,
		`xdp_monitor_tracepoint_attached{tracepoint="xdp:xdp_redirect_err"} 1`,
		`xdp_monitor_tracepoint_attached{tracepoint="xdp:xdp_exception"} 1`,
	} {
		if !xdpHasLine(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}
	wantLogged := 1
	if present {
		wantLogged = 0
	}
	if n := strings.Count(e.Stderr.String(), "xdp:xdp_redirect_map_err"); n != wantLogged {
		t.Errorf("the tracepoint is reported %d times at startup, want %d (present: %v):\n%s", n, wantLogged, present, e.Stderr)
	}
	e.Scrape(t)
	if n := strings.Count(e.Stderr.String(), "xdp:xdp_redirect_map_err"); n != wantLogged {
		t.Errorf("the tracepoint is reported again on scrape:\n%s", e.Stderr)
	}
}
