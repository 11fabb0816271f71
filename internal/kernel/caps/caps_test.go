package caps

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// childEnv selects the scenario a re-executed test binary runs: Drop
// changes the whole process irreversibly, so each case runs in a child.
const childEnv = "XDP_EXPORTER_CAPS_CHILD"

func TestMain(m *testing.M) {
	if scenario := os.Getenv(childEnv); scenario != "" {
		if err := child(scenario); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// child pins goroutines to extra OS threads so that a drop applied to the
// calling thread only would be caught, drops, and checks every thread.
func child(scenario string) error {
	release := make(chan struct{})
	defer close(release)
	ready := make(chan struct{})
	for i := 0; i < 4; i++ {
		go func() {
			runtime.LockOSThread()
			ready <- struct{}{}
			<-release
		}()
		<-ready
	}

	keep := Of(unix.CAP_SYS_ADMIN)
	wantBounding := keep
	if scenario == "no-setpcap" {
		// As under systemd's AmbientCapabilities: everything needed, but
		// not CAP_SETPCAP, so the bounding set cannot shrink.
		st, err := Current()
		if err != nil {
			return err
		}
		wantBounding = st.Bounding
		eff := st.Effective &^ Of(unix.CAP_SETPCAP)
		hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
		data := [2]unix.CapUserData{
			{Effective: uint32(eff), Permitted: uint32(st.Permitted), Inheritable: uint32(st.Inheritable)},
			{Effective: uint32(eff >> 32), Permitted: uint32(st.Permitted >> 32), Inheritable: uint32(st.Inheritable >> 32)},
		}
		if _, _, errno := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
			return fmt.Errorf("preparing: capset: %v", errno)
		}
	}

	res, err := Drop(keep)
	if err != nil {
		return err
	}
	if res.BoundingKept != (scenario == "no-setpcap") {
		return fmt.Errorf("BoundingKept = %v in scenario %s", res.BoundingKept, scenario)
	}
	tasks, err := filepath.Glob("/proc/self/task/*/status")
	if err != nil || len(tasks) < 5 {
		return fmt.Errorf("want at least 5 threads, found %d (%v)", len(tasks), err)
	}
	want := State{Effective: keep, Permitted: keep, Bounding: wantBounding}
	for _, path := range tasks {
		got, err := ReadStatus(path)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("%s: got %+v, want %+v", path, got, want)
		}
	}
	if res.After != want {
		return fmt.Errorf("Result.After = %+v, want %+v", res.After, want)
	}
	return nil
}

// TestDropAllThreads runs Drop in a child process holding root's full set
// and checks CapEff/CapPrm/CapInh/CapBnd/CapAmb of every one of its threads.
func TestDropAllThreads(t *testing.T) {
	testenv.Privileged(t)
	st, err := Current()
	if err != nil {
		t.Fatal(err)
	}
	if !st.Permitted.Has(unix.CAP_SYS_ADMIN) || !st.Effective.Has(unix.CAP_SETPCAP) {
		testenv.Unavailable(t, "needs CAP_SYS_ADMIN and CAP_SETPCAP, have %s", st.Effective)
	}
	for _, scenario := range []string{"full", "no-setpcap"} {
		t.Run(scenario, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"="+scenario)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
		})
	}
}

func TestReadStatus(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "status")
	body := "Name:\tx\nCapInh:\t0000000000000000\nCapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\nCapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\n"
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	got, err := ReadStatus(path)
	if err != nil {
		t.Fatal(err)
	}
	all := Set(1<<41 - 1)
	if want := (State{Effective: all, Permitted: all, Bounding: all}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(body, "CapAmb", "Other", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadStatus(path); err == nil || !strings.Contains(err.Error(), "4 of the 5") {
		t.Fatalf("missing CapAmb: err = %v", err)
	}
}

func TestSetString(t *testing.T) {
	if got := Of(unix.CAP_NET_ADMIN, unix.CAP_BPF, unix.CAP_PERFMON).String(); got != "cap_net_admin,cap_perfmon,cap_bpf" {
		t.Fatalf("got %q", got)
	}
	if got := Set(0).String(); got != "none" {
		t.Fatalf("got %q", got)
	}
}

// FuzzParseStatus: whatever a status file holds, parseStatus either
// rejects it or returns sets that print back to the same Cap* lines.
func FuzzParseStatus(f *testing.F) {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("CapInh:\t0\nCapPrm:\tffffffffffffffff\nCapEff:\t1\nCapBnd:\t0000\nCapAmb:\t 10 \n"))
	f.Add([]byte("CapInh:\t0\nCapInh:\t0\nCapPrm:\t0\nCapEff:\t0\nCapBnd:\t0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		st, err := parseStatus(b)
		if err != nil {
			return
		}
		out := fmt.Sprintf("CapInh:\t%016x\nCapPrm:\t%016x\nCapEff:\t%016x\nCapBnd:\t%016x\nCapAmb:\t%016x\n",
			uint64(st.Inheritable), uint64(st.Permitted), uint64(st.Effective), uint64(st.Bounding), uint64(st.Ambient))
		again, err := parseStatus([]byte(out))
		if err != nil || again != st {
			t.Fatalf("%q parsed to %+v; printed back it parses to %+v, %v", b, st, again, err)
		}
	})
}
