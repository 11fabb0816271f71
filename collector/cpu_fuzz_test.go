package collector

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// FuzzCPUProcfs writes /proc/stat, /proc/softirqs and /proc/net/softnet_stat
// from the fuzz input into a procfs directory and scrapes the cpu
// collector: whatever the files hold, Update either fails or emits metrics
// a pedantic registry accepts, and no counter is negative or not a number
// (what the files hold are tick and event counts).
func FuzzCPUProcfs(f *testing.F) {
	// The files captured on the 2-CPU VM; the generated 64-CPU set adds
	// size, not coverage.
	var files [3][]byte
	for i, name := range []string{"stat", "softirqs", "net/softnet_stat"} {
		b, err := os.ReadFile(filepath.Join("testdata", "proc", "2cpu", name))
		if err != nil {
			f.Fatal(err)
		}
		files[i] = b
	}
	f.Add(files[0], files[1], files[2])
	// One directory per fuzzing process; the body runs serially in it.
	proc := f.TempDir()
	if err := os.Mkdir(filepath.Join(proc, "net"), 0o755); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, stat, softirqs, softnet []byte) {
		for name, b := range map[string][]byte{"stat": stat, "softirqs": softirqs, "net/softnet_stat": softnet} {
			if err := os.WriteFile(filepath.Join(proc, name), b, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		for _, all := range []bool{false, true} {
			c, err := newCPUCollector(CPUConfig{ProcFS: proc, SoftirqsAll: all}, slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			// Partial metrics are kept when a file fails, so they
			// must be valid whether or not Update returned an error.
			ms, _ := collect(c)
			mfs, err := pedanticGather(ms)
			if err != nil {
				t.Fatalf("pedantic registry: %v", err)
			}
			for _, mf := range mfs {
				for _, m := range mf.GetMetric() {
					if v := m.GetCounter().GetValue(); !(v >= 0) || math.IsInf(v, 0) {
						t.Fatalf("%s%v = %v", mf.GetName(), m.GetLabel(), v)
					}
				}
			}
		}
	})
}
