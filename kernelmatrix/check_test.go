package kernelmatrix

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/support"
	"github.com/xdp-exporter/xdp_exporter/lab"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// supportOutEnv names the file TestDefaultExporter writes what it saw to:
// the matrix sets it in each guest and builds the support table from it.
const supportOutEnv = "XDP_EXPORTER_SUPPORT_OUT"

// frames is what each exact-count check sends.
const frames = 20_000

// commandLine is the INFO line of a netdev command (collector/netdev.go),
// a source of the NIC signals (collector/nic.go) or a BPF hook
// (collector/bpf_tc.go) the kernel lacks.
var commandLine = regexp.MustCompile(`msg="(?:netdev command|source of NIC signals|BPF hook) not supported[^"]*" collector=(\S+) (?:command|source|hook)=(\S+) hint="([^"]*)"`)

// unsupportedLine is the INFO line a collector logs once when the host
// lacks what it needs (collector/collector.go).
var unsupportedLine = regexp.MustCompile(`msg="collector not supported on this host[^"]*" collector=(\S+) .*?reason="((?:[^"\\]|\\.)*)"`)

// optIn are the kernel-facing collectors that are off by default but need
// nothing but the kernel (no device or program named on the command
// line): the support table lists them too, each from an exporter started
// with it alone.
var optIn = []string{"drop"}

// TestDefaultExporter starts the real binary with no flags, as a user
// would, and checks that every default collector either works or says,
// once at INFO, that this kernel lacks what it needs; none fails and no
// line is an ERROR. Each opt-in collector of optIn gets the same check in
// an exporter of its own.
func TestDefaultExporter(t *testing.T) {
	testenv.Privileged(t)
	sup := support.Support{Kernel: release(t), Collectors: map[string]string{}, Tracepoints: map[string]bool{}, Commands: map[string]string{}}
	mfs, log := checkCollectors(t, sup, "")
	if len(sup.Collectors) == 0 {
		t.Fatalf("no xdp_scrape_collector_success series; log:\n%s", log)
	}
	for _, m := range commandLine.FindAllStringSubmatch(log, -1) {
		sup.Commands[m[1]+" "+m[2]] = m[3]
	}
	for _, c := range []string{"monitor", "napi"} {
		for tp, v := range mfs.Values("xdp_"+c+"_tracepoint_attached", "tracepoint") {
			sup.Tracepoints[c+" "+tp] = v == 1
		}
	}
	for _, name := range optIn {
		checkCollectors(t, sup, name)
	}
	if out := os.Getenv(supportOutEnv); out != "" {
		b, err := json.MarshalIndent(sup, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(out, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// checkCollectors runs the exporter (the default set, or the opt-in
// collector optIn alone), scrapes it twice (a collector that fails only
// once it has state must show it too), and records in sup whether each
// collector works or is unsupported, with the reason it logged once at
// INFO; a failure or an ERROR line fails the test. It returns the second
// scrape and the log.
func checkCollectors(t *testing.T, sup support.Support, optIn string) (exportertest.Families, string) {
	t.Helper()
	var args []string
	if optIn != "" {
		args = []string{"--collector.disable-defaults", "--collector." + optIn}
	}
	e := exportertest.Run(t, exportertest.FreeAddr(t), args...)
	e.Scrape(t)
	mfs := exportertest.Parse(t, e.Scrape(t))
	e.Stop(t)
	log := e.Stderr.String()

	reasons := map[string]string{}
	for _, m := range unsupportedLine.FindAllStringSubmatch(log, -1) {
		if _, dup := reasons[m[1]]; dup {
			t.Errorf("collector %s logged unsupported more than once:\n%s", m[1], log)
		}
		reasons[m[1]] = strings.ReplaceAll(m[2], `\"`, `"`)
	}
	unsupported := mfs.Values("xdp_scrape_collector_unsupported", "collector")
	for name, ok := range mfs.Values("xdp_scrape_collector_success", "collector") {
		row := name
		if optIn != "" {
			row = name + " (--collector." + name + ")"
		}
		switch {
		case ok == 1 && unsupported[name] == 0:
			sup.Collectors[row] = "works"
		case ok == 1 && unsupported[name] == 1:
			if reasons[name] == "" {
				t.Errorf("collector %s is unsupported but logged no reason at INFO:\n%s", name, log)
			}
			sup.Collectors[row] = "unsupported: " + reasons[name]
		default:
			t.Errorf("collector %s failed on %s; log:\n%s", name, sup.Kernel, log)
			sup.Collectors[row] = "failed"
		}
	}
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "level=ERROR") {
			t.Errorf("the exporter logged an error on %s: %s", sup.Kernel, line)
		}
	}
	return mfs, log
}

// TestExactCounts sends exactly frames frames into a two-queue veth whose
// DUT end runs the rxq collector's XDP_DROP program, and checks every BPF
// collector against that number: rxq per queue and CPU, the NAPI
// histogram's work sum, and the bpf collector's listing of the program.
func TestExactCounts(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	dut := pair.Host.Name
	e := exportertest.Run(t, exportertest.FreeAddr(t),
		"--collector.rxq", "--collector.rxq.device="+dut, "--collector.rxq.action=drop")
	vethtest.SendExactly(t, pair, frames)

	var rxq, work float64
	deadline := time.Now().Add(10 * time.Second)
	for {
		mfs := exportertest.Parse(t, e.Scrape(t))
		rxq, _ = mfs.Sum("xdp_rxq_packets_total", "device", dut)
		work, _ = mfs.Sum("xdp_napi_poll_work", "device", dut)
		if rxq == frames && work == frames || time.Now().After(deadline) {
			if got := mfs.Values("xdp_bpf_prog_info", "device")[dut]; got != 1 {
				t.Errorf("the bpf collector does not list the rxq program on %s; log:\n%s", dut, e.Stderr)
			}
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if rxq != frames {
		t.Errorf("xdp_rxq_packets_total for %s = %v, want %d", dut, rxq, frames)
	}
	if work != frames {
		t.Errorf("xdp_napi_poll_work_sum for %s = %v, want %d", dut, work, frames)
	}
}

// TestXDPExceptionsExact attaches a program that aborts every frame and
// checks that the default exporter's monitor collector counts each one.
func TestXDPExceptionsExact(t *testing.T) {
	// Two queues, one per sending CPU: with one, both CPUs fill the same
	// 256-frame ring, and when its NAPI runs on the other CPU, veth drops
	// frames at transmit before any XDP program sees them.
	pair := vethtest.Pair(t, 2)
	vethtest.AttachVerdict(t, pair, xdptest.Aborted)
	e := exportertest.Run(t, exportertest.FreeAddr(t))
	vethtest.SendExactly(t, pair, frames)
	var got float64
	deadline := time.Now().Add(10 * time.Second)
	for got != frames && time.Now().Before(deadline) {
		got = e.Sum(t, "xdp_monitor_exceptions_total", "device", pair.Host.Name, "action", "aborted")
		time.Sleep(50 * time.Millisecond)
	}
	if got != frames {
		var series []string
		for _, line := range strings.Split(e.Scrape(t), "\n") {
			if strings.HasPrefix(line, "xdp_monitor_exceptions_total") || strings.HasPrefix(line, "xdp_monitor_") {
				series = append(series, line)
			}
		}
		veth := vethtest.EthtoolS(t, "", pair.Host.Name)
		t.Fatalf("xdp_monitor_exceptions_total{action=\"aborted\"} for %s = %v, want %d; veth counted %d XDP drops; series:\n%s\nlog:\n%s",
			pair.Host.Name, got, frames, veth["rx_queue_0_xdp_drops"]+veth["rx_queue_1_xdp_drops"], strings.Join(series, "\n"), e.Stderr)
	}
}

// TestMemlock runs the exporter as a service manager would start it with
// the distribution's default RLIMIT_MEMLOCK of 64 KiB. Kernels before 5.11
// charge BPF maps to that limit: with CAP_SYS_RESOURCE the exporter lifts
// it and every BPF collector works; without, they fail and the log names
// the limit as the cause. Later kernels do not charge it, and everything
// works either way.
func TestMemlock(t *testing.T) {
	testenv.Privileged(t)
	for _, tool := range []string{"prlimit", "capsh"} { // util-linux, libcap2-bin
		if _, err := exec.LookPath(tool); err != nil {
			testenv.Unavailable(t, "%s not installed (make deps)", tool)
			return
		}
	}
	charged := chargesMemlock(t)
	for _, tc := range []struct {
		name     string
		wrap     []string
		mayLift  bool
		wantFail bool
	}{
		{"with CAP_SYS_RESOURCE", nil, true, false},
		{"without CAP_SYS_RESOURCE", []string{"capsh", "--drop=cap_sys_resource", "--", "-c", `exec "$0" "$@"`}, false, charged},
	} {
		t.Run(tc.name, func(t *testing.T) {
			addr := exportertest.FreeAddr(t)
			args := append([]string{"prlimit", "--memlock=65536:65536"}, tc.wrap...)
			args = append(args, exportertest.Build(t), "--web.listen-address="+addr)
			e := exportertest.Start(t, addr, exec.Command(args[0], args[1:]...))
			mfs := exportertest.Parse(t, e.Scrape(t))
			success := mfs.Values("xdp_scrape_collector_success", "collector")
			log := e.Stderr.String()
			for _, c := range []string{"monitor", "napi"} {
				failed := success[c] == 0
				if failed != tc.wantFail {
					t.Errorf("collector %s success %v with memlock 64 KiB, want failure=%v; log:\n%s", c, success[c], tc.wantFail, log)
				}
			}
			if tc.wantFail && !strings.Contains(log, "RLIMIT_MEMLOCK is 64 KiB and this kernel (before 5.11) charges BPF memory to it") {
				t.Errorf("the failure does not name RLIMIT_MEMLOCK as the cause:\n%s", log)
			}
			if strings.Contains(log, "BPF not permitted") && !tc.wantFail {
				t.Errorf("BPF refused where it should work:\n%s", log)
			}
		})
	}
}

// chargesMemlock reports whether this kernel charges BPF maps to
// RLIMIT_MEMLOCK: a map made with the limit at zero fails with EPERM only
// where it is charged (the probe cilium/ebpf's rlimit package makes).
func chargesMemlock(t *testing.T) bool {
	t.Helper()
	var old unix.Rlimit
	if err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, nil, &old); err != nil {
		t.Fatal(err)
	}
	if err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &unix.Rlimit{Cur: 0, Max: old.Max}, nil); err != nil {
		t.Fatal(err)
	}
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err := unix.Prlimit(0, unix.RLIMIT_MEMLOCK, &old, nil); err != nil {
		t.Fatal(err)
	}
	if err == nil {
		m.Close()
		return false
	}
	if !errors.Is(err, unix.EPERM) {
		t.Fatalf("probing memlock charging: %v", err)
	}
	return true
}

// release is the running kernel's uname -r.
func release(t *testing.T) string {
	t.Helper()
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		t.Fatal(err)
	}
	return unix.ByteSliceToString(u.Release[:])
}

// TestDropReasonsExact runs the lab's two scenarios without XDP, each
// with frames frames, under the exporter with its drop collector: the
// Linux baseline (`iptables -t raw -j DROP`) must count every frame as
// NETFILTER_DROP on the DUT, and the whole receive path to a UDP port
// with no socket every frame as NO_SOCKET. Before 5.17 the collector must
// say unsupported.
func TestDropReasonsExact(t *testing.T) {
	testenv.Privileged(t)
	lb := lab.ForTest(vethns.UniqueID())
	testenv.Check(t, lb.Up(1), "bringing the lab up")
	t.Cleanup(func() {
		if err := lb.Down(); err != nil {
			t.Errorf("lab down: %v", err)
		}
	})
	e := exportertest.Run(t, exportertest.FreeAddr(t), "--collector.drop")
	if testenv.KernelBefore(t, 5, 17) {
		mfs := exportertest.Parse(t, e.Scrape(t))
		if mfs.Values("xdp_scrape_collector_unsupported", "collector")["drop"] != 1 ||
			mfs.Values("xdp_scrape_collector_success", "collector")["drop"] != 1 {
			t.Errorf("before 5.17 the drop collector must report unsupported, not fail; log:\n%s", e.Stderr)
		}
		return
	}
	for _, tc := range []struct {
		scenario lab.Scenario
		reason   string
	}{{lab.Linux, "NETFILTER_DROP"}, {lab.NoSocket, "NO_SOCKET"}} {
		t.Run(string(tc.scenario), func(t *testing.T) {
			before := e.Sum(t, "xdp_drop_packets_total", "device", lb.DUT, "reason", tc.reason)
			res, err := lb.Run(context.Background(), lab.RunConfig{Scenario: tc.scenario, Queues: 1,
				Count: frames, Size: trafficgen.MinFrameSize})
			testenv.Check(t, err, "lab run")
			if res.Sent < frames || res.Received != res.Sent {
				t.Fatalf("sent %d (asked %d), DUT received %d", res.Sent, frames, res.Received)
			}
			var got float64
			deadline := time.Now().Add(10 * time.Second)
			for got != float64(res.Sent) && time.Now().Before(deadline) {
				got = e.Sum(t, "xdp_drop_packets_total", "device", lb.DUT, "reason", tc.reason) - before
				time.Sleep(50 * time.Millisecond)
			}
			if got != float64(res.Sent) {
				var series []string
				for _, line := range strings.Split(e.Scrape(t), "\n") {
					if strings.HasPrefix(line, "xdp_skb_drops") {
						series = append(series, line)
					}
				}
				t.Fatalf("xdp_drop_packets_total{device=%q,reason=%q} rose by %v, want %d; series:\n%s",
					lb.DUT, tc.reason, got, res.Sent, strings.Join(series, "\n"))
			}
		})
	}
}
