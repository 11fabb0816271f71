package exportertest

import (
	"fmt"
	"path/filepath"
	"testing"

	"github.com/prometheus/procfs"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
)

// Status is the process's /proc/PID/status, read by prometheus/procfs.
func (p *Process) Status(t testing.TB) procfs.ProcStatus {
	t.Helper()
	proc, err := procfs.NewProc(p.Cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := proc.NewStatus()
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// ThreadCaps is the capability sets of every thread of the process, by
// the path of its status file.
func (p *Process) ThreadCaps(t testing.TB) map[string]caps.State {
	t.Helper()
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", p.Cmd.Process.Pid))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no threads for pid %d: %v", p.Cmd.Process.Pid, err)
	}
	out := map[string]caps.State{}
	for _, path := range paths {
		st, err := caps.ReadStatus(path)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = st
	}
	return out
}
