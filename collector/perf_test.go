package collector

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/cpulist"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

func onlineCPUs(t testing.TB) []int {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := cpulist.Parse(string(b))
	if err != nil {
		t.Fatal(err)
	}
	return cpus
}

func openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// onCPU runs fn on a thread pinned to cpu.
func onCPU(t testing.TB, cpu int, fn func()) {
	t.Helper()
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		// The thread is left locked so it exits with the goroutine and its
		// affinity never leaks into the Go scheduler's pool.
		var set unix.CPUSet
		set.Set(cpu)
		if err := unix.SchedSetaffinity(0, &set); err != nil {
			errc <- err
			return
		}
		fn()
		errc <- nil
	}()
	if err := <-errc; err != nil {
		t.Fatalf("pinning to CPU %d: %v", cpu, err)
	}
}

// TestPerfSoftwareLive pins a thread to each CPU in turn, makes it take a
// known number of page faults and sleeps, and checks that the per-CPU
// software counters of that CPU grew by at least as much.
func TestPerfSoftwareLive(t *testing.T) {
	testenv.Privileged(t)
	c, err := newPerfCollector(PerfConfig{Software: true}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "opening software perf events")
	defer c.Close()

	const pages, sleeps = 2048, 50
	page := os.Getpagesize()
	for _, cpu := range onlineCPUs(t) {
		label := strconv.Itoa(cpu)
		before := gather(t, c)
		onCPU(t, cpu, func() {
			mem, err := unix.Mmap(-1, 0, pages*page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
			if err != nil {
				t.Error(err)
				return
			}
			defer unix.Munmap(mem)
			// One fault per page: no transparent huge pages.
			if err := unix.Madvise(mem, unix.MADV_NOHUGEPAGE); err != nil {
				t.Error(err)
				return
			}
			for i := 0; i < len(mem); i += page {
				mem[i] = 1
			}
			for i := 0; i < sleeps; i++ {
				time.Sleep(time.Millisecond)
			}
		})
		after := gather(t, c)
		delta := func(name string, labels ...string) float64 {
			return after.Value(t, name, labels...) - before.Value(t, name, labels...)
		}
		if d := delta("xdp_perf_page_faults_total", "cpu", label); d < pages {
			t.Errorf("CPU %d: page faults grew by %v after touching %d fresh pages there", cpu, d, pages)
		}
		if d := delta("xdp_perf_context_switches_total", "cpu", label); d < sleeps {
			t.Errorf("CPU %d: context switches grew by %v after %d sleeps there", cpu, d, sleeps)
		}
		if d := delta("xdp_perf_cpu_clock_seconds_total", "cpu", label); d <= 0 {
			t.Errorf("CPU %d: cpu-clock did not move (%v)", cpu, d)
		}
		en := after.Value(t, "xdp_perf_group_enabled_seconds_total", "cpu", label, "group", "software")
		run := after.Value(t, "xdp_perf_group_running_seconds_total", "cpu", label, "group", "software")
		if run <= 0 || run > en {
			t.Errorf("CPU %d: software group running %v s of %v s enabled", cpu, run, en)
		}
	}
}

// TestPerfHardware requests every group. On a host without a PMU (this VM)
// the collector must still build, log the missing support exactly once,
// mark the hardware events unavailable, export the software events, and
// scrape with success 1. On a host with a PMU the hardware families appear.
func TestPerfHardware(t *testing.T) {
	testenv.Privileged(t)
	var logs exportertest.Log
	c, err := newPerfCollector(PerfConfig{Hardware: true, Software: true}, slog.New(slog.NewTextHandler(&logs, nil)))
	testenv.Check(t, err, "opening perf events")
	defer c.Close()

	set := NewSet(map[string]Collector{"perf": c}, slog.New(slog.DiscardHandler))
	reg := prometheus.NewRegistry()
	reg.MustRegister(set.Scrape(context.Background()))
	list, err := reg.Gather()
	if err != nil {
		t.Fatalf("scrape failed: %v", err)
	}
	mfs := exportertest.Families{}
	for _, mf := range list {
		mfs[mf.GetName()] = mf
	}
	if v := mfs.Value(t, "xdp_scrape_collector_success", "collector", "perf"); v != 1 {
		t.Errorf("success = %v, want 1", v)
	}
	if n := len(mfs.Series("xdp_perf_context_switches_total")); n != len(onlineCPUs(t)) {
		t.Errorf("context switches on %d CPUs, want %d", n, len(onlineCPUs(t)))
	}
	if mfs.Value(t, "xdp_perf_event_available", "event", "cycles") == 1 {
		t.Logf("this host has hardware counters")
		if n := len(mfs.Series("xdp_perf_cycles_total")); n != len(onlineCPUs(t)) {
			t.Errorf("cycles on %d CPUs, want %d", n, len(onlineCPUs(t)))
		}
		return
	}
	for _, ev := range []string{"instructions", "cache-references", "cache-misses"} {
		if v := mfs.Value(t, "xdp_perf_event_available", "event", ev); v != 0 {
			t.Errorf("%s available = %v although cycles is not", ev, v)
		}
	}
	if n := strings.Count(logs.String(), "hardware perf counters are not supported on this host"); n != 1 {
		t.Errorf("the missing-PMU message was logged %d times, want once; log:\n%s", n, logs.String())
	}
	for _, f := range []string{"xdp_perf_cycles_total", "xdp_perf_instructions_total", "xdp_perf_cache_misses_total"} {
		if _, ok := mfs[f]; ok {
			t.Errorf("%s exported without hardware counters", f)
		}
	}
	if _, err := newPerfCollector(PerfConfig{Hardware: true}, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "not supported") {
		t.Errorf("hardware-only on a host without a PMU: err = %v, want a not-supported error", err)
	}
}

// TestPerfCloseFDs counts this process' fds around the collector's life:
// one per event per CPU while open, none after Close.
func TestPerfCloseFDs(t *testing.T) {
	testenv.Privileged(t)
	before := openFDs(t)
	c, err := newPerfCollector(PerfConfig{Software: true, Hardware: true}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "opening perf events")
	open := openFDs(t)
	events := 0
	for _, g := range c.groups {
		events += g.group.FDs()
	}
	if events == 0 || open-before != events {
		t.Errorf("%d fds opened for %d events", open-before, events)
	}
	gather(t, c)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if after := openFDs(t); after != before {
		t.Errorf("%d fds before, %d after Close", before, after)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	if err := c.Update(context.Background(), NewLinkSnapshot(), make(chan prometheus.Metric, 100)); err == nil {
		t.Error("Update after Close succeeded")
	}
}

const perfChildEnv = "XDP_EXPORTER_PERF_EACCES_CHILD"

// TestPerfPermissionDenied runs this test binary as nobody (no CAP_PERFMON)
// and checks that opening CPU-wide events fails with an error that says
// what is missing.
func TestPerfPermissionDenied(t *testing.T) {
	if os.Getenv(perfChildEnv) == "1" {
		_, err := newPerfCollector(PerfConfig{Software: true}, slog.New(slog.DiscardHandler))
		os.Stdout.WriteString("child error: " + strings.ReplaceAll(errString(err), "\n", " | ") + "\n")
		return
	}
	out := runAsNobody(t, "TestPerfPermissionDenied", perfChildEnv)
	for _, want := range []string{"child error: perf: no event group could be opened", "permission denied", "CAP_PERFMON", "perf_event_paranoid"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

// runAsNobody runs this test binary's test as nobody (uid 65534, no
// capabilities) with env=1, at kernel.perf_event_paranoid 2 if it was
// lower (at <= 0 any user may open CPU-wide events: nothing to deny), and
// returns its output.
func runAsNobody(t *testing.T, test, env string) []byte {
	t.Helper()
	testenv.Privileged(t)
	const paranoid = "/proc/sys/kernel/perf_event_paranoid"
	if b, err := os.ReadFile(paranoid); err == nil {
		if lvl, _ := strconv.Atoi(strings.TrimSpace(string(b))); lvl <= 0 {
			if err := os.WriteFile(paranoid, []byte("2"), 0); err != nil {
				t.Fatalf("raising kernel.perf_event_paranoid from %d: %v", lvl, err)
			}
			t.Cleanup(func() { os.WriteFile(paranoid, b, 0) })
		}
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "perf-eacces")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	bin := filepath.Join(dir, "collector.test")
	data, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^"+test+"$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	return out
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
