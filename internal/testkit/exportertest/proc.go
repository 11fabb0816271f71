package exportertest

import (
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
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

// ParentPID is the parent of process pid.
func ParentPID(t testing.TB, pid int) int {
	t.Helper()
	proc, err := procfs.NewProc(pid)
	if err != nil {
		t.Fatal(err)
	}
	st, err := proc.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return st.PPID
}

// ListeningPID is the process that listens on addr, as ss(8) reports it.
func ListeningPID(t testing.TB, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("ss", "-Hltnp", "sport = :"+port).CombinedOutput()
	if err != nil {
		t.Fatalf("ss: %v\n%s", err, out)
	}
	pids := map[int]bool{}
	for _, m := range regexp.MustCompile(`pid=(\d+)`).FindAllStringSubmatch(string(out), -1) {
		pid, _ := strconv.Atoi(m[1])
		pids[pid] = true
	}
	if len(pids) != 1 {
		t.Fatalf("want one process listening on %s, ss says:\n%s", addr, out)
	}
	return slices.Collect(maps.Keys(pids))[0]
}

// StatusLines are the named lines of every thread's /proc status file.
func StatusLines(t testing.TB, pid int, keys ...string) map[string]map[string]string {
	t.Helper()
	paths, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no threads for pid %d: %v", pid, err)
	}
	out := map[string]map[string]string{}
	for _, path := range paths {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		out[path] = map[string]string{}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			if slices.Contains(keys, k) {
				out[path][k] = strings.TrimSpace(v)
			}
		}
	}
	return out
}
