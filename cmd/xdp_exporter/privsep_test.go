package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestPrivilegeSeparation starts the real binary as root with the default
// collectors and default runtime flags, beside a program attached by
// iproute2 that BPF stats time. The process that listens on the port is
// the server: no capability in any set of any thread, no_new_privs, one
// seccomp filter; the process started is the monitor, holding exactly the
// default collectors' scrape-time capabilities. Its scrapes carry the same
// families and series as those of an exporter that serves from one process
// with every capability (--no-runtime.privilege-separation
// --no-runtime.drop-capabilities), every collector succeeding and the
// program listed with its run time.
func TestPrivilegeSeparation(t *testing.T) {
	testenv.Privileged(t)
	pair := vethtest.Pair(t, 1)
	id := vethtest.AttachWithIP(t, pair.Host.Name, "../../bpf/xdptest/sized_bpfel.o", "xdp")
	split := startExporter(t, "--collector.bpf.enable-stats")
	whole := startExporter(t, "--collector.bpf.enable-stats", "--no-runtime.privilege-separation", "--no-runtime.drop-capabilities")
	vethtest.SendExactly(t, pair, 1000)

	server := exportertest.ListeningPID(t, split.Addr)
	if server == split.Cmd.Process.Pid {
		t.Fatalf("the process started (%d) listens itself", server)
	}
	if ppid := exportertest.ParentPID(t, server); ppid != split.Cmd.Process.Pid {
		t.Errorf("the listening process %d is the child of %d, not of the exporter started (%d)", server, ppid, split.Cmd.Process.Pid)
	}
	for path, got := range exportertest.StatusLines(t, server, "CapEff", "CapPrm", "CapInh", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters") {
		for k, want := range map[string]string{"CapEff": "0000000000000000", "CapPrm": "0000000000000000", "CapInh": "0000000000000000", "CapAmb": "0000000000000000", "NoNewPrivs": "1", "Seccomp": "2", "Seccomp_filters": "1"} {
			if got[k] != want {
				t.Errorf("%s: %s %q, want %q", path, k, got[k], want)
			}
		}
	}
	keep := defaultScrapeCaps()
	for path, got := range split.ThreadCaps(t) {
		if got.Effective != keep || got.Permitted != keep {
			t.Errorf("monitor %s: effective %s, permitted %s, want %s", path, got.Effective, got.Permitted, keep)
		}
	}
	if exportertest.ListeningPID(t, whole.Addr) != whole.Cmd.Process.Pid {
		t.Error("with --no-runtime.privilege-separation another process listens")
	}

	// The two exporters started apart, so series that appear with traffic
	// (a CPU's first NAPI poll of a device) may differ for a moment.
	var diff []string
	for range 5 {
		a, b := exportertest.Parse(t, split.Scrape(t)), exportertest.Parse(t, whole.Scrape(t))
		if diff = seriesDiff(a, b); len(diff) == 0 {
			pid := strconv.FormatUint(uint64(id), 10)
			a.Value(t, "xdp_bpf_prog_info", "device", pair.Host.Name, "prog_id", pid)
			if runs := a.Value(t, "xdp_bpf_prog_runs_total", "prog_id", pid); runs != 1000 {
				t.Errorf("runs of the program iproute2 attached: %v, want 1000", runs)
			}
			if secs := a.Value(t, "xdp_bpf_prog_run_seconds_total", "prog_id", pid); secs <= 0 {
				t.Errorf("run time of the program iproute2 attached: %v, want > 0", secs)
			}
			for c, v := range a.Values("xdp_scrape_collector_success", "collector") {
				if v != 1 {
					t.Errorf("collector %s failed behind the separation; log:\n%s", c, split.Stderr)
				}
			}
			t.Logf("%d families, %d series in both", len(a), a.Count())
			return
		}
		time.Sleep(time.Second)
	}
	t.Errorf("the separated exporter's scrape differs from the single process's:\n%s", strings.Join(diff, "\n"))
}

// seriesDiff lists the families and series counts that differ.
func seriesDiff(a, b exportertest.Families) []string {
	var diff []string
	for name := range a {
		if b[name] == nil {
			diff = append(diff, "only separated: "+name)
		} else if x, y := exportertest.FamilySeries(a[name]), exportertest.FamilySeries(b[name]); x != y {
			diff = append(diff, fmt.Sprintf("%s: %d series separated, %d in one process", name, x, y))
		}
	}
	for name := range b {
		if a[name] == nil {
			diff = append(diff, "only in one process: "+name)
		}
	}
	slices.Sort(diff)
	return diff
}

// TestMonitorRefusesBadRequests plays a compromised server: it takes a
// copy of the server process's end of the channel (pidfd_getfd, as an
// attacker running code in that process holds it) and sends the monitor
// a request with a wrong magic, one of an unknown kind, one with a
// timeout of zero and one with a format out of range. The monitor refuses
// each, logs it, and keeps serving: a valid request sent the same way is
// answered, and scrapes afterwards are whole.
func TestMonitorRefusesBadRequests(t *testing.T) {
	testenv.Privileged(t)
	e := startExporter(t)
	before := exportertest.Parse(t, e.Scrape(t))
	server := exportertest.ListeningPID(t, e.Addr)
	pidfd, err := unix.PidfdOpen(server, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(pidfd)
	fd, err := unix.PidfdGetfd(pidfd, channelFD, 0)
	if err != nil {
		t.Fatalf("pidfd_getfd of the server's fd %d: %v", channelFD, err)
	}
	channel := os.NewFile(uintptr(fd), "stolen channel")
	defer channel.Close()

	frame := func(magic, kind, id, timeoutMS uint32, format uint16) {
		b := binary.LittleEndian.AppendUint32(nil, magic)
		b = binary.LittleEndian.AppendUint32(b, kind)
		b = binary.LittleEndian.AppendUint32(b, id)
		b = binary.LittleEndian.AppendUint32(b, timeoutMS)
		b = binary.LittleEndian.AppendUint16(b, format)
		b = binary.LittleEndian.AppendUint16(b, 0)
		if _, err := channel.Write(b); err != nil {
			t.Fatal(err)
		}
	}
	const xdp1 = 0x31706478
	frame(0x0badf00d, 1, 900001, 1000, 0)
	frame(xdp1, 7, 900002, 1000, 0)
	frame(xdp1, 1, 900003, 0, 0)
	frame(xdp1, 1, 900005, 1000, 99)
	frame(xdp1, 1, 900004, 1000, 0)

	// The answers go to the server, which reads the channel and logs
	// those to requests it did not send.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(e.Stderr.String(), "id=900004") && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	log := e.Stderr.String()
	for _, want := range []string{
		`msg="refused a request from the HTTP server process" id=900001 err="malformed request: magic 0xbadf00d, want 0x31706478"`,
		`msg="refused a request from the HTTP server process" id=900002 err="unknown request kind 7"`,
		`msg="refused a request from the HTTP server process" id=900003 err="malformed request: timeout 0s outside 1ms to 1h0m0s"`,
		`msg="refused a request from the HTTP server process" id=900005 err="malformed request: format 99 of 7"`,
		`msg="the monitor answered a request this process did not send" id=900004 status=0`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
	if strings.Contains(log, "id=900004 err=") {
		t.Errorf("the valid request was refused:\n%s", log)
	}
	after := exportertest.Parse(t, e.Scrape(t))
	if diff := seriesDiff(after, before); len(diff) > 0 {
		t.Errorf("the scrape after the refusals differs:\n%s", strings.Join(diff, "\n"))
	}
	if err := exportertest.CheckScrape(e.Scrape(t)); err != nil {
		t.Error(err)
	}
}

// TestCgoBuildSeparates builds the exporter as a plain `go build` does on
// a machine with a C compiler, with cgo, where syscall.AllThreadsSyscall
// refuses to run, and checks that it still drops: the monitor to the
// default collectors' scrape-time capabilities on every thread, the
// server to none, with its filter.
func TestCgoBuildSeparates(t *testing.T) {
	testenv.Privileged(t)
	bin := filepath.Join(t.TempDir(), "xdp_exporter")
	build := exec.Command("go", "build", "-o", bin, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=1")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build with cgo: %v\n%s", err, out)
	}
	if out, err := exec.Command("go", "version", "-m", bin).Output(); err != nil || !strings.Contains(string(out), "CGO_ENABLED=1") {
		t.Fatalf("the build is not a cgo build: %v\n%s", err, out)
	}
	addr := exportertest.FreeAddr(t)
	e := exportertest.Start(t, addr, exec.Command(bin, "--web.listen-address="+addr))
	if err := exportertest.CheckScrape(e.Scrape(t)); err != nil {
		t.Fatalf("%v\nlog:\n%s", err, e.Stderr)
	}
	keep := defaultScrapeCaps()
	for path, got := range e.ThreadCaps(t) {
		if got.Effective != keep || got.Permitted != keep {
			t.Errorf("monitor %s: effective %s, permitted %s, want %s", path, got.Effective, got.Permitted, keep)
		}
	}
	server := exportertest.ListeningPID(t, addr)
	for path, got := range exportertest.StatusLines(t, server, "CapEff", "CapPrm", "Seccomp") {
		if got["CapEff"] != "0000000000000000" || got["CapPrm"] != "0000000000000000" || got["Seccomp"] != "2" {
			t.Errorf("server %s: %v, want no capability and seccomp filter mode", path, got)
		}
	}
}

// TestServerOrMonitorGone: when the server process dies, the monitor
// logs it and exits with status 1 (for systemd's Restart=on-failure to
// start both again); when the monitor dies, the server dies with it and
// the port is free.
func TestServerOrMonitorGone(t *testing.T) {
	testenv.Privileged(t)
	e := startExporter(t)
	server := exportertest.ListeningPID(t, e.Addr)
	if err := unix.Kill(server, unix.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := e.Exited(t, 10*time.Second)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Errorf("the monitor ended with %v after its server was killed, want exit status 1", err)
	}
	if !strings.Contains(e.Stderr.String(), `msg="the HTTP server process ended" err="signal: killed"`) {
		t.Errorf("the monitor did not log its server's end:\n%s", e.Stderr)
	}

	e = startExporter(t)
	server = exportertest.ListeningPID(t, e.Addr)
	e.Kill(t)
	deadline := time.Now().Add(10 * time.Second)
	for running(server) && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if running(server) {
		t.Errorf("the server %d outlived its monitor's SIGKILL by 10s", server)
	}
	l, err := net.Listen("tcp", e.Addr)
	if err != nil {
		t.Errorf("the port is still taken after both processes ended: %v", err)
	} else {
		l.Close()
	}
}

// TestPrivilegedPort: the listeners are made before the drop, so root
// serves on a port below 1024 though neither process keeps
// CAP_NET_BIND_SERVICE.
func TestPrivilegedPort(t *testing.T) {
	testenv.Privileged(t)
	var addr string
	for port := 1000; port > 900 && addr == ""; port-- {
		if l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port)); err == nil {
			addr = l.Addr().String()
			l.Close()
		}
	}
	if addr == "" {
		t.Fatal("no free port between 901 and 1000")
	}
	e := exportertest.Run(t, addr)
	if err := exportertest.CheckScrape(e.Scrape(t)); err != nil {
		t.Fatal(err)
	}
	for path, got := range e.ThreadCaps(t) {
		if got.Effective.Has(unix.CAP_NET_BIND_SERVICE) {
			t.Errorf("monitor %s keeps CAP_NET_BIND_SERVICE", path)
		}
	}
}

// TestSystemdSocketActivation: with --web.systemd-socket the monitor
// takes the socket systemd passes (LISTEN_FDS, LISTEN_PID) and hands it
// to the server, which alone holds it.
func TestSystemdSocketActivation(t *testing.T) {
	testenv.Privileged(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f, err := l.(*net.TCPListener).File()
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	// sh's exec keeps the pid, which LISTEN_PID must name.
	cmd := exec.Command("sh", "-c", `LISTEN_PID=$$ LISTEN_FDS=1 exec "$0" "$@"`, exportertest.Build(t), "--web.systemd-socket")
	cmd.ExtraFiles = []*os.File{f}
	e := exportertest.Start(t, addr, cmd)
	l.Close()
	f.Close()
	if err := exportertest.CheckScrape(e.Scrape(t)); err != nil {
		t.Fatal(err)
	}
	if pid := exportertest.ListeningPID(t, addr); exportertest.ParentPID(t, pid) != e.Cmd.Process.Pid {
		t.Errorf("the socket is held by %d, not by the exporter's server", pid)
	}
}

// running reports whether process pid exists and is not a zombie: an
// orphan that died stays one where PID 1 does not reap it, as in the
// kernel matrix's guests.
func running(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	_, rest, ok := strings.Cut(string(b), ") ")
	return ok && !strings.HasPrefix(rest, "Z")
}
