package main

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// droppedCaps are the capabilities BPF collectors need; the exporter must
// keep serving without them.
var droppedCaps = map[string]int{
	"cap_sys_admin": unix.CAP_SYS_ADMIN,
	"cap_bpf":       unix.CAP_BPF,
	"cap_perfmon":   unix.CAP_PERFMON,
}

// startWithoutBPFCaps runs the exporter under capsh with droppedCaps removed
// from the bounding set, so that the exec'd binary (root, hence permitted =
// bounding set) never holds them, and waits until it answers.
func startWithoutBPFCaps(t *testing.T, args ...string) *exporter {
	t.Helper()
	capsh, err := exec.LookPath("capsh")
	if err != nil {
		testenv.Unavailable(t, "capsh not installed (apt-get install libcap2-bin)")
		return nil
	}
	var drop []string
	for name := range droppedCaps {
		drop = append(drop, name)
	}
	addr := exportertest.FreeAddr(t)
	// bash's exec keeps the pid, so signals and /proc/PID reach the exporter.
	shell := append([]string{"--drop=" + strings.Join(drop, ","), "--", "-c", `exec "$0" "$@"`,
		exportertest.Build(t), "--web.listen-address=" + addr}, args...)
	return exportertest.Start(t, addr, exec.Command(capsh, shell...))
}

// effectiveCaps reads CapEff of a process.
func effectiveCaps(t *testing.T, pid int) uint64 {
	t.Helper()
	status, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(status), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			caps, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				t.Fatal(err)
			}
			return caps
		}
	}
	t.Fatal("no CapEff line in /proc/PID/status")
	return 0
}

// TestWithoutBPFCapabilities runs the binary with its default collectors
// but without CAP_SYS_ADMIN, CAP_BPF and CAP_PERFMON: the bpf collector
// reports success 0 and says which capability it lacks, once, and the
// exporter keeps serving valid scrapes.
func TestWithoutBPFCapabilities(t *testing.T) {
	testenv.Privileged(t)
	e := startWithoutBPFCaps(t)
	eff := effectiveCaps(t, e.Cmd.Process.Pid)
	for name, bit := range droppedCaps {
		if eff&(1<<bit) != 0 {
			t.Fatalf("the exporter still holds %s (CapEff %x): capsh did not drop it", name, eff)
		}
	}

	for range 2 {
		body := e.Scrape(t)
		promtest.CheckMetrics(t, body)
		families := exportertest.Parse(t, body)
		for _, name := range []string{"process_open_fds", "xdp_exporter_build_info", "xdp_scrape_collector_success"} {
			if families[name] == nil {
				t.Errorf("family %s missing from a scrape without BPF capabilities", name)
			}
		}
		if !strings.Contains(body, "xdp_scrape_collector_success{collector=\"bpf\"} 0\n") {
			t.Errorf("bpf collector does not report success 0 without CAP_SYS_ADMIN:\n%s", grepLines(body, "xdp_scrape_collector_success"))
		}
	}
	log := e.Stderr.String()
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, "collector=bpf") && strings.Contains(l, "CAP_SYS_ADMIN") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 1 {
		t.Errorf("want exactly one log line naming the bpf collector and CAP_SYS_ADMIN, got %d; log:\n%s", len(lines), log)
	}
}

func grepLines(body, substr string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.Contains(l, substr) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
