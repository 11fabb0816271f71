package sandbox

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// childEnv makes the test binary the confined child of TestConfine.
const childEnv = "XDP_EXPORTER_SANDBOX_CHILD"

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		os.Exit(child())
	}
	os.Exit(m.Run())
}

// probes are system calls the HTTP server never makes, each a way out of
// the sandbox: a new socket (a connection out, netlink, a raw socket),
// bpf(2), perf_event_open(2), an ioctl, execve(2), ptrace(2) and a new
// namespace.
var probes = []struct {
	name string
	call func() error
}{
	{"socket(AF_INET)", func() error { return closeFD(unix.Socket(unix.AF_INET, unix.SOCK_STREAM, 0)) }},
	{"socket(AF_NETLINK)", func() error {
		return closeFD(unix.Socket(unix.AF_NETLINK, unix.SOCK_RAW, unix.NETLINK_ROUTE))
	}},
	{"bpf(BPF_PROG_GET_NEXT_ID)", func() error {
		attr := [16]byte{}
		_, _, errno := unix.Syscall(unix.SYS_BPF, unix.BPF_PROG_GET_NEXT_ID, uintptr(unsafe.Pointer(&attr[0])), uintptr(len(attr)))
		return errnoErr(errno)
	}},
	{"perf_event_open", func() error {
		attr := unix.PerfEventAttr{Type: unix.PERF_TYPE_SOFTWARE, Config: unix.PERF_COUNT_SW_CPU_CLOCK, Size: uint32(unsafe.Sizeof(unix.PerfEventAttr{}))}
		return closeFD(unix.PerfEventOpen(&attr, 0, -1, -1, 0))
	}},
	{"ioctl(TIOCINQ)", func() error {
		r, w, err := os.Pipe()
		if err != nil {
			return fmt.Errorf("pipe: %w", err)
		}
		defer r.Close()
		defer w.Close()
		_, err = unix.IoctlGetInt(int(r.Fd()), unix.TIOCINQ)
		return err
	}},
	{"execve", func() error {
		path, _ := unix.BytePtrFromString("/bin/true")
		argv := []*byte{path, nil}
		_, _, errno := unix.Syscall(unix.SYS_EXECVE, uintptr(unsafe.Pointer(path)), uintptr(unsafe.Pointer(&argv[0])), uintptr(unsafe.Pointer(&argv[1])))
		return errnoErr(errno)
	}},
	{"ptrace(PTRACE_TRACEME)", func() error {
		_, _, errno := unix.Syscall(unix.SYS_PTRACE, unix.PTRACE_TRACEME, 0, 0)
		return errnoErr(errno)
	}},
	{"unshare(CLONE_NEWUSER)", func() error { return unix.Unshare(unix.CLONE_NEWUSER) }},
}

func closeFD(fd int, err error) error {
	if err == nil {
		unix.Close(fd)
	}
	return err
}

func errnoErr(errno unix.Errno) error {
	if errno == 0 {
		return nil
	}
	return errno
}

// child confines itself as the server does and prints, for each probe,
// its result before and after, and its own status lines.
func child() int {
	before := map[string]error{}
	for _, p := range probes {
		if p.name != "execve" && p.name != "ptrace(PTRACE_TRACEME)" && p.name != "unshare(CLONE_NEWUSER)" {
			before[p.name] = p.call()
		}
	}
	if err := Confine(); err != nil {
		fmt.Println("confine:", err)
		return 1
	}
	for _, p := range probes {
		fmt.Printf("%s before=%v after=%v\n", p.name, before[p.name], p.call())
	}
	status, err := os.ReadFile("/proc/self/status")
	if err != nil {
		fmt.Println("reading /proc/self/status:", err)
		return 1
	}
	for _, l := range strings.Split(string(status), "\n") {
		for _, k := range []string{"CapEff:", "CapPrm:", "NoNewPrivs:", "Seccomp:"} {
			if strings.HasPrefix(l, k) {
				fmt.Println(strings.Join(strings.Fields(l), " "))
			}
		}
	}
	return 0
}

// TestConfine runs a child that confines itself with Confine: every probe
// fails with EPERM afterwards, while the ones that need no privilege
// (sockets, perf_event_open for its own thread, ioctl on a pipe) worked
// in the same process before; the child still opens and reads a file, as
// the server reads its web config; it holds no capability, has
// no_new_privs and is in seccomp filter mode.
func TestConfine(t *testing.T) {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, out)
	}
	lines := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		k, v, _ := strings.Cut(l, " ")
		lines[k] = v
	}
	for _, p := range probes {
		got, ok := lines[p.name]
		if !ok {
			t.Errorf("%s: no result from the child:\n%s", p.name, out)
			continue
		}
		if !strings.HasSuffix(got, "after="+unix.EPERM.Error()) {
			t.Errorf("%s: %s, want EPERM once confined", p.name, got)
		}
	}
	for _, name := range []string{"socket(AF_INET)", "socket(AF_NETLINK)", "ioctl(TIOCINQ)"} {
		if got := lines[name]; !strings.HasPrefix(got, "before=<nil>") {
			t.Errorf("%s: %s; the probe must work before the filter, or its EPERM after proves nothing", name, got)
		}
	}
	want := map[string]string{"CapEff:": "0000000000000000", "CapPrm:": "0000000000000000", "NoNewPrivs:": "1", "Seccomp:": "2"}
	for k, v := range want {
		if lines[k] != v {
			t.Errorf("%s %q, want %q\n%s", k, lines[k], v, out)
		}
	}
}

// TestPolicyNamesKnown: every name on the allowlist that the running
// architecture has is in the policy, and the policy assembles.
func TestPolicyNamesKnown(t *testing.T) {
	p, err := Policy()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Assemble(); err != nil {
		t.Fatal(err)
	}
	for _, must := range []string{"read", "write", "futex", "accept4", "openat", "epoll_pwait", "getrandom"} {
		found := false
		for _, n := range p.Syscalls[0].Names {
			found = found || n == must
		}
		if !found {
			t.Errorf("%s missing from the policy", must)
		}
	}
}
