package collector

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"github.com/xdp-exporter/xdp_exporter/internal/exportertest"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// words lays out u64s in host byte order, as the kernel writes read_format.
func words(w ...uint64) []byte {
	b := make([]byte, 8*len(w))
	for i, v := range w {
		binary.NativeEndian.PutUint64(b[8*i:], v)
	}
	return b
}

// capturedSoftwareRead is one read(2) of the software group leader on CPU 1
// of this VM, 200 ms after enabling (little-endian x86-64): nr=5,
// time_enabled = time_running = 200362846 ns, then {value, id} for
// cpu-clock, task-clock, context-switches, cpu-migrations, page-faults.
const capturedSoftwareRead = "0500000000000000" + "5e4bf10b00000000" + "5e4bf10b00000000" +
	"c549f10b00000000" + "1100000000000000" + "f950f10b00000000" + "1200000000000000" +
	"1101000000000000" + "1300000000000000" + "0200000000000000" + "1400000000000000" +
	"e806000000000000" + "1500000000000000"

func TestPerfDecode(t *testing.T) {
	t.Parallel()
	full := uint64(perfReadFormat)
	captured, err := hex.DecodeString(capturedSoftwareRead)
	if err != nil {
		t.Fatal(err)
	}
	if binary.NativeEndian.Uint64(words(1)) != binary.LittleEndian.Uint64(words(1)) {
		captured = nil // the capture is little-endian; its case is skipped below
	}
	ok := []struct {
		name   string
		buf    []byte
		format uint64
		want   perfGroupRead
	}{
		{"hardware pair cycles/instructions, multiplexed to half", words(2, 1_000_000_000, 500_000_000, 2_000_000_000, 7, 3_100_000_000, 8), full,
			perfGroupRead{1_000_000_000, 500_000_000, []perfValue{{2_000_000_000, 7}, {3_100_000_000, 8}}}},
		{"six hardware events with PERF_FORMAT_LOST", words(6, 10, 10, 1, 1, 0, 2, 2, 0, 3, 3, 0, 4, 4, 0, 5, 5, 9, 6, 6, 0),
			full | unix.PERF_FORMAT_LOST,
			perfGroupRead{10, 10, []perfValue{{1, 1}, {2, 2}, {3, 3}, {4, 4}, {5, 5}, {6, 6}}}},
		{"no ids, no times", words(2, 42, 43), unix.PERF_FORMAT_GROUP,
			perfGroupRead{0, 0, []perfValue{{42, 0}, {43, 0}}}},
		{"enabled only", words(1, 99, 5), unix.PERF_FORMAT_GROUP | unix.PERF_FORMAT_TOTAL_TIME_ENABLED,
			perfGroupRead{99, 0, []perfValue{{5, 0}}}},
		{"captured software group", captured, full,
			perfGroupRead{200362846, 200362846, []perfValue{{0x0bf149c5, 17}, {0x0bf150f9, 18}, {273, 19}, {2, 20}, {1768, 21}}}},
	}
	for _, tc := range ok {
		if tc.buf == nil {
			continue
		}
		got, err := decodePerfGroupRead(tc.buf, tc.format)
		if err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
		if n := perfReadSize(tc.format, len(tc.want.Values)); n != len(tc.buf) {
			t.Errorf("%s: perfReadSize = %d, buffer is %d", tc.name, n, len(tc.buf))
		}
	}

	bad := []struct {
		name   string
		buf    []byte
		format uint64
		errHas string
	}{
		{"empty", nil, full, "empty"},
		{"partial word", words(1, 2, 3, 4, 5)[:39], full, "whole number"},
		{"nr zero", words(0, 1, 1), full, "group of 0"},
		{"nr absurd", words(1 << 40), full, "group of"},
		{"truncated", words(2, 10, 10, 1, 1, 2), full, "want 56"},
		{"trailing data", words(1, 10, 10, 1, 1, 0), full, "want 40"},
		{"running > enabled", words(1, 10, 11, 1, 1), full, "exceeds"},
		{"not a group read", words(1, 10, 10, 1, 1), unix.PERF_FORMAT_TOTAL_TIME_ENABLED, "PERF_FORMAT_GROUP"},
	}
	for _, tc := range bad {
		_, err := decodePerfGroupRead(tc.buf, tc.format)
		if err == nil || !strings.Contains(err.Error(), tc.errHas) {
			t.Errorf("%s: err = %v, want one containing %q", tc.name, err, tc.errHas)
		}
	}
}

// TestPerfScaler feeds successive reads of a two-event group through the
// multiplexing correction.
func TestPerfScaler(t *testing.T) {
	t.Parallel()
	var s perfScaler
	steps := []struct {
		enabled, running, a, b uint64
		want                   []float64
	}{
		{100, 50, 10, 4, []float64{20, 8}},    // ran half the time: x2
		{200, 150, 30, 14, []float64{40, 18}}, // ran all of the interval: +raw
		{300, 175, 35, 14, []float64{60, 18}}, // ran a quarter: +5x4, +0
		{300, 175, 35, 14, []float64{60, 18}}, // nothing happened
	}
	for i, st := range steps {
		got, err := s.add(perfGroupRead{st.enabled, st.running, []perfValue{{st.a, 1}, {st.b, 2}}})
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !reflect.DeepEqual(got, st.want) {
			t.Fatalf("step %d: got %v, want %v", i, got, st.want)
		}
	}
	if _, err := s.add(perfGroupRead{400, 200, []perfValue{{34, 1}, {20, 2}}}); err == nil {
		t.Error("a count going backwards was accepted")
	}
	if _, err := s.add(perfGroupRead{400, 200, []perfValue{{40, 1}}}); err == nil {
		t.Error("a group changing size was accepted")
	}
}

func TestParseCPUList(t *testing.T) {
	t.Parallel()
	for in, want := range map[string][]int{
		"0-3,8":   {0, 1, 2, 3, 8},
		"0-1\n":   {0, 1},
		"5,1,0-1": {0, 1, 5},
		"7":       {7},
	} {
		got, err := parseCPUList(in)
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("parseCPUList(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "a", "3-1", "0-", "-1", "1,,2", "0-99999999"} {
		if got, err := parseCPUList(in); err == nil {
			t.Errorf("parseCPUList(%q) = %v, want an error", in, got)
		}
	}
}

func onlineCPUs(t testing.TB) []int {
	t.Helper()
	b, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		t.Fatal(err)
	}
	cpus, err := parseCPUList(string(b))
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
			return value(t, after, name, labels...) - value(t, before, name, labels...)
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
		en := value(t, after, "xdp_perf_group_enabled_seconds_total", "cpu", label, "group", "software")
		run := value(t, after, "xdp_perf_group_running_seconds_total", "cpu", label, "group", "software")
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
	mfs := map[string]*dto.MetricFamily{}
	for _, mf := range list {
		mfs[mf.GetName()] = mf
	}
	if v := value(t, mfs, "xdp_scrape_collector_success", "collector", "perf"); v != 1 {
		t.Errorf("success = %v, want 1", v)
	}
	if n := seriesCount(mfs, "xdp_perf_context_switches_total"); n != len(onlineCPUs(t)) {
		t.Errorf("context switches on %d CPUs, want %d", n, len(onlineCPUs(t)))
	}
	if value(t, mfs, "xdp_perf_event_available", "event", "cycles") == 1 {
		t.Logf("this host has hardware counters")
		if n := seriesCount(mfs, "xdp_perf_cycles_total"); n != len(onlineCPUs(t)) {
			t.Errorf("cycles on %d CPUs, want %d", n, len(onlineCPUs(t)))
		}
		return
	}
	for _, ev := range []string{"instructions", "cache-references", "cache-misses"} {
		if v := value(t, mfs, "xdp_perf_event_available", "event", ev); v != 0 {
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
		events += len(g.fds)
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
	if err := c.Update(context.Background(), make(chan prometheus.Metric, 100)); err == nil {
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
	testenv.Privileged(t)
	// At perf_event_paranoid <= 0 any user may open CPU-wide events and
	// there is nothing to deny: raise it to the common default for the
	// test, and put it back.
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
	cmd := exec.Command(bin, "-test.run=^TestPerfPermissionDenied$", "-test.count=1")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), perfChildEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	t.Logf("%s", out)
	for _, want := range []string{"child error: perf: no event group could be opened", "permission denied", "CAP_PERFMON", "perf_event_paranoid"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
}

func errString(err error) string {
	if err == nil {
		return "<nil>"
	}
	return err.Error()
}
