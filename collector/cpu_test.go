package collector

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

func newCPUForTest(t testing.TB, cfg CPUConfig) *cpuCollector {
	t.Helper()
	c, err := newCPUCollector(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// TestCPUCaptured reads the files captured from this 2-CPU VM
// (testdata/proc/2cpu) and checks values against the raw file contents.
func TestCPUCaptured(t *testing.T) {
	t.Parallel()
	mfs := gather(t, newCPUForTest(t, CPUConfig{ProcFS: "testdata/proc/2cpu"}))

	// cpu1 12223 0 3520 32557 1955 0 101 41 0 0, in USER_HZ=100 ticks.
	for mode, ticks := range map[string]float64{
		"user": 12223, "nice": 0, "system": 3520, "idle": 32557,
		"iowait": 1955, "irq": 0, "softirq": 101, "steal": 41,
	} {
		if got, want := mfs.Value(t, "xdp_cpu_seconds_total", "cpu", "1", "mode", mode), ticks/100; got != want {
			t.Errorf("cpu 1 %s = %v s, want %v", mode, got, want)
		}
	}
	if got := mfs.Value(t, "xdp_cpu_seconds_total", "cpu", "0", "mode", "idle"); got != 366.95 {
		t.Errorf("cpu 0 idle = %v, want 366.95", got)
	}
	if got := mfs.Value(t, "xdp_cpu_softirqs_total", "cpu", "1", "vector", "NET_RX"); got != 9915 {
		t.Errorf("cpu 1 NET_RX = %v, want 9915", got)
	}
	if got := mfs.Value(t, "xdp_cpu_softirqs_total", "cpu", "0", "vector", "NET_TX"); got != 9 {
		t.Errorf("cpu 0 NET_TX = %v, want 9", got)
	}
	if got := mfs.Value(t, "xdp_cpu_softnet_processed_total", "cpu", "1"); got != 0x22b3 {
		t.Errorf("cpu 1 softnet processed = %v, want %d", got, 0x22b3)
	}
	if got := mfs.Value(t, "xdp_cpu_softnet_processed_total", "cpu", "0"); got != 0x2a {
		t.Errorf("cpu 0 softnet processed = %v, want %d", got, 0x2a)
	}
	for name, want := range map[string]int{
		"xdp_cpu_seconds_total":                2 * 8,
		"xdp_cpu_softirqs_total":               2 * 2,
		"xdp_cpu_softnet_processed_total":      2,
		"xdp_cpu_softnet_dropped_total":        2,
		"xdp_cpu_softnet_times_squeezed_total": 2,
	} {
		if got := len(mfs.Series(name)); got != want {
			t.Errorf("%s: %d series, want %d", name, got, want)
		}
	}
}

// TestCPU64 reads the 64-CPU set built by testdata/proc/gen64cpu.go from the
// captured files: CPU n holds captured CPU n%2 plus a per-CPU offset
// (stat field f: +n*(f+1); softirqs row r: +n*(r+1); softnet processed
// +n*4096, dropped n, time_squeeze 2n).
func TestCPU64(t *testing.T) {
	t.Parallel()
	for _, all := range []bool{false, true} {
		mfs := gather(t, newCPUForTest(t, CPUConfig{ProcFS: "testdata/proc/64cpu", SoftirqsAll: all}))
		vectors := 2
		if all {
			vectors = 10
		}
		for name, want := range map[string]int{
			"xdp_cpu_seconds_total":                64 * 8,
			"xdp_cpu_softirqs_total":               64 * vectors,
			"xdp_cpu_softnet_processed_total":      64,
			"xdp_cpu_softnet_dropped_total":        64,
			"xdp_cpu_softnet_times_squeezed_total": 64,
		} {
			if got := len(mfs.Series(name)); got != want {
				t.Errorf("all=%v: %s: %d series, want %d", all, name, got, want)
			}
		}
		checks := []struct {
			name   string
			labels []string
			want   float64
		}{
			{"xdp_cpu_seconds_total", []string{"cpu", "63", "mode", "user"}, (12223 + 63*1) / 100.0},
			{"xdp_cpu_seconds_total", []string{"cpu", "63", "mode", "idle"}, (32557 + 63*4) / 100.0},
			{"xdp_cpu_seconds_total", []string{"cpu", "63", "mode", "softirq"}, (101 + 63*7) / 100.0},
			{"xdp_cpu_seconds_total", []string{"cpu", "62", "mode", "steal"}, (43 + 62*8) / 100.0},
			{"xdp_cpu_softirqs_total", []string{"cpu", "63", "vector", "NET_RX"}, 9915 + 63*4},
			{"xdp_cpu_softirqs_total", []string{"cpu", "63", "vector", "NET_TX"}, 0 + 63*3},
			{"xdp_cpu_softirqs_total", []string{"cpu", "40", "vector", "NET_RX"}, 9125 + 40*4},
			{"xdp_cpu_softnet_processed_total", []string{"cpu", "63"}, 0x22b3 + 63*4096},
			{"xdp_cpu_softnet_dropped_total", []string{"cpu", "63"}, 63},
			{"xdp_cpu_softnet_times_squeezed_total", []string{"cpu", "17"}, 34},
		}
		if all {
			checks = append(checks, struct {
				name   string
				labels []string
				want   float64
			}{"xdp_cpu_softirqs_total", []string{"cpu", "63", "vector", "RCU"}, 25685 + 63*10})
		}
		for _, c := range checks {
			if got := mfs.Value(t, c.name, c.labels...); got != c.want {
				t.Errorf("all=%v: %s%v = %v, want %v", all, c.name, c.labels, got, c.want)
			}
		}
	}
}

// TestCPUMalformed replaces one file of the captured set at a time: the
// Update error names the file, the other two sources still emit, and the
// scrape reports success 0 for the collector instead of failing.
func TestCPUMalformed(t *testing.T) {
	t.Parallel()
	cases := []struct {
		file, content, family string
	}{
		{"stat", "cpu  1 2 3\ncpu0 1 x 3 4\n", "xdp_cpu_seconds_total"},
		{"stat", "intr 1\nctxt 2\n", "xdp_cpu_seconds_total"},
		{"stat", "cpuX 1 2 3 4 5 6 7 8\n", "xdp_cpu_seconds_total"},
		{"softirqs", "", "xdp_cpu_softirqs_total"},
		{"softirqs", "   CPU0  CPU1\n  NET_RX:  1  -2\n", "xdp_cpu_softirqs_total"},
		{"softirqs", "   CPU0  CPU1\n  TIMER:  1  2\n", "xdp_cpu_softirqs_total"},
		{"net/softnet_stat", "0000002a 00000000\n", "xdp_cpu_softnet_processed_total"},
		{"net/softnet_stat", "zzzzzzzz 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n", "xdp_cpu_softnet_processed_total"},
		{"net/softnet_stat", "", "xdp_cpu_softnet_processed_total"},
		{"net/softnet_stat", strings.Repeat("00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n", 2), "xdp_cpu_softnet_processed_total"},
		{"net/softnet_stat", "-", "xdp_cpu_softnet_processed_total"},
	}
	for _, tc := range cases {
		dir := copyFixture(t, "testdata/proc/2cpu")
		path := filepath.Join(dir, tc.file)
		if tc.content == "-" {
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(path, []byte(tc.content), 0o644); err != nil {
			t.Fatal(err)
		}
		c := newCPUForTest(t, CPUConfig{ProcFS: dir})

		ch := make(chan prometheus.Metric, 1000)
		err := c.Update(context.Background(), NewLinkSnapshot(), ch)
		close(ch)
		if err == nil || !strings.Contains(err.Error(), tc.file) {
			t.Errorf("%s %q: err = %v, want an error naming the file", tc.file, tc.content, err)
			continue
		}
		got := map[string]int{}
		for m := range ch {
			got[fqName(m)]++
		}
		if got[tc.family] != 0 {
			t.Errorf("%s %q: %d samples of %s from a bad file", tc.file, tc.content, got[tc.family], tc.family)
		}
		for _, f := range []string{"xdp_cpu_seconds_total", "xdp_cpu_softirqs_total", "xdp_cpu_softnet_processed_total"} {
			if f != tc.family && got[f] == 0 {
				t.Errorf("%s %q: %s missing although its file is fine", tc.file, tc.content, f)
			}
		}

		set := NewSet(map[string]Collector{"cpu": c}, slog.New(slog.DiscardHandler))
		// A plain registry, as main uses: Set.Scrape describes only the
		// scrape families.
		reg := prometheus.NewRegistry()
		reg.MustRegister(set.Scrape(context.Background()))
		mfs, gerr := reg.Gather()
		if gerr != nil {
			t.Fatalf("%s: scrape failed: %v", tc.file, gerr)
		}
		byName := exportertest.Families{}
		for _, mf := range mfs {
			byName[mf.GetName()] = mf
		}
		if v := byName.Value(t, "xdp_scrape_collector_success", "collector", "cpu"); v != 0 {
			t.Errorf("%s %q: success = %v, want 0", tc.file, tc.content, v)
		}
	}
}

func TestCPUMissingProcFS(t *testing.T) {
	t.Parallel()
	_, err := newCPUCollector(CPUConfig{ProcFS: filepath.Join(t.TempDir(), "nope")}, slog.New(slog.DiscardHandler))
	if err == nil || !strings.Contains(err.Error(), "nope") {
		t.Fatalf("err = %v, want an error naming the path", err)
	}
}

func copyFixture(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

func fqName(m prometheus.Metric) string {
	s := m.Desc().String()
	_, rest, _ := strings.Cut(s, `fqName: "`)
	name, _, _ := strings.Cut(rest, `"`)
	return name
}

// TestCPULiveBusy spins every CPU for half a second and checks that the
// live /proc/stat shows the non-idle time: user and system, and steal,
// the time a virtual CPU wanted to spin while its hypervisor ran another
// guest (a CI run on a shared VM once counted 0.02 s of user and system
// time for the whole second).
func TestCPULiveBusy(t *testing.T) {
	c := newCPUForTest(t, CPUConfig{ProcFS: "/proc"})
	busy := func(mfs exportertest.Families) float64 {
		sum := 0.0
		for _, mode := range []string{"user", "system", "steal"} {
			v, _ := mfs.Sum("xdp_cpu_seconds_total", "mode", mode)
			sum += v
		}
		return sum
	}
	before := busy(gather(t, c))
	deadline := time.Now().Add(500 * time.Millisecond)
	done := make(chan struct{})
	for i := 0; i < runtime.NumCPU(); i++ {
		go func() {
			for time.Now().Before(deadline) {
			}
			done <- struct{}{}
		}()
	}
	for i := 0; i < runtime.NumCPU(); i++ {
		<-done
	}
	after := busy(gather(t, c))
	// 0.5 s of spinning per CPU; ask for a fifth of one CPU's share so a
	// loaded shared host still passes, while a stuck counter cannot.
	if after-before < 0.1 {
		t.Fatalf("user+system+steal seconds grew by %.2f over 0.5 s of spinning on %d CPUs", after-before, runtime.NumCPU())
	}
}

// TestCPULiveSoftnet sends frames into a veth whose receiving end runs an
// XDP_PASS program: each frame goes up the stack through
// __netif_receive_skb_core, which counts it in softnet_stat processed on the
// CPU running the NAPI poll. Other traffic on the host only adds, so the sum
// over CPUs must grow by at least the frames sent.
func TestCPULiveSoftnet(t *testing.T) {
	testenv.Privileged(t)
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdict(t, pair, xdptest.Pass)

	c := newCPUForTest(t, CPUConfig{ProcFS: "/proc"})
	processed := func() map[string]uint32 {
		out := map[string]uint32{}
		for _, m := range gather(t, c)["xdp_cpu_softnet_processed_total"].GetMetric() {
			out[m.GetLabel()[0].GetValue()] = uint32(m.GetCounter().GetValue())
		}
		return out
	}
	before := processed()
	const n = 50_000
	vethtest.SendExactly(t, pair, n)
	after := processed()
	var delta uint64
	for cpu, v := range after {
		// The kernel counter is 32 bits: subtract modulo 2^32.
		delta += uint64(v - before[cpu])
	}
	if delta < n {
		t.Fatalf("softnet processed grew by %d over all CPUs after %d frames passed to the stack", delta, n)
	}
	t.Logf("softnet processed grew by %d for %d frames", delta, n)
}

// BenchmarkCPUUpdate64 measures one Update over the 64-CPU fixtures: three
// file reads and parses, 832 samples (all=false) or 1,344 (all=true).
func BenchmarkCPUUpdate64(b *testing.B) {
	for _, all := range []bool{false, true} {
		name := "net"
		if all {
			name = "all"
		}
		b.Run("softirqs="+name, func(b *testing.B) {
			benchUpdate(b, newCPUForTest(b, CPUConfig{ProcFS: "testdata/proc/64cpu", SoftirqsAll: all}))
		})
	}
}

// TestSoftnetWrap: softnet_stat's columns are 32-bit and wrap (processed
// at 10 Mpps every 7 minutes). A copy of the captured files whose CPU 1
// processed count crosses 2^32 between scrapes, and whose dropped count
// wraps twice over three scrapes, yields monotonic 64-bit totals.
func TestSoftnetWrap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, f := range []string{"stat", "softirqs"} {
		b, err := os.ReadFile(filepath.Join("testdata/proc/2cpu", f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(dir, "net"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The layout of the captured file (Linux 6.x, 15 columns): processed,
	// dropped, squeezed, zeros up to the CPU index in column 13, then the
	// two queue lengths.
	write := func(processed, dropped uint32) {
		t.Helper()
		line := func(p, d uint32, cpu int) string {
			return fmt.Sprintf("%08x %08x"+strings.Repeat(" 00000000", 10)+" %08x 00000000 00000000\n", p, d, cpu)
		}
		body := line(42, 0, 0) + line(processed, dropped, 1)
		if err := os.WriteFile(filepath.Join(dir, "net", "softnet_stat"), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := newCPUForTest(t, CPUConfig{ProcFS: dir})
	scrape := func() (processed, dropped float64) {
		mfs := gather(t, c)
		return mfs.Value(t, "xdp_cpu_softnet_processed_total", "cpu", "1"), mfs.Value(t, "xdp_cpu_softnet_dropped_total", "cpu", "1")
	}
	for i, step := range []struct {
		processed, dropped uint32
		wantP, wantD       float64
	}{
		{0xfffffff0, 0x80000000, 0xfffffff0, 0x80000000},
		{0x00000010, 0x00000001, 0x100000010, 0x100000001}, // both wrapped
		{0x00000110, 0x80000002, 0x100000110, 0x180000002}, // no wrap
		{0x00000100, 0x00000003, 0x200000100, 0x200000003}, // both wrapped again
	} {
		write(step.processed, step.dropped)
		p, d := scrape()
		if p != step.wantP || d != step.wantD {
			t.Errorf("scrape %d: processed %#x dropped %#x, want %#x and %#x", i, uint64(p), uint64(d), uint64(step.wantP), uint64(step.wantD))
		}
	}
	if _, d := scrape(); d != 0x200000003 {
		t.Errorf("an unchanged reading moved the total to %#x", uint64(d))
	}
}
