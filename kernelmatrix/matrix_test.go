package kernelmatrix

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/support"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/vm"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// suitesEnv picks a subset of the matrix's suites, comma-separated
// (bullseye,bookworm,trixie,trixie-arm64); all when unset. The support table is checked
// only when every suite ran.
const suitesEnv = "XDP_EXPORTER_KERNELS"

// packagesEnv picks a subset of guestPackages, comma-separated
// (bpf/rxqobserve,collector); all when unset. With a subset that leaves
// out the kernels package, no support report is read or checked.
const packagesEnv = "XDP_EXPORTER_KERNEL_PACKAGES"

// benchEnv runs, instead of the tests, the benchmarks matching this regexp
// in the selected packages (with benchTimeEnv's -test.benchtime, default
// 11x), and logs their output: how a cost is measured on the kernels that
// have what this machine's lacks. It passes when they ran.
const (
	benchEnv     = "XDP_EXPORTER_KERNEL_BENCH"
	benchTimeEnv = "XDP_EXPORTER_KERNEL_BENCHTIME"
)

// guestPackages are the packages whose test binaries each guest runs, with
// the tests left out there and why. Everything else in them runs on every
// kernel.
var guestPackages = []guestPackage{
	// The checks of check_test.go; the matrix, the PCIe topology guest and
	// the emulated NICs' guest boot QEMU themselves and run on the host, as
	// does the check of docs/kernels.md against the recording.
	{pkg: "kernelmatrix", skip: "TestKernelMatrix|TestPCIeTopology|TestEmulatedNICs|TestKernelsDocGenerated", arm64: true},
	// The churn tests make 2,000 veth pairs or program replacements: they
	// test the reaper's bookkeeping, which no kernel changes, and take
	// minutes under QEMU's emulator. TestHostShipped runs Prometheus
	// servers over the fixture host, which reads no kernel and whose
	// guests have no Prometheus. TestHostSeriesDoc holds docs/cardinality.md's
	// table to the development kernel's scrape; the budget test runs here.
	{pkg: "collector", skip: "TestReapChurn|TestEthtoolVethChurn|TestHostShipped|TestHostSeriesDoc", arm64: true},
	// The rxq program under BPF_PROG_RUN; drop reasons named from each
	// kernel's BTF (openvswitch's subsystem on 6.12).
	{pkg: "bpf/rxq", arm64: true},
	{pkg: "bpf/drop", arm64: true},
	// The napi object's typed slot keys, claimed and freed.
	{pkg: "bpf/napi", arm64: true},
	// The readers against each kernel's own objects: the ethtool ioctls
	// on a real veth (the guard page); the ethtool family's eth-mac
	// statistics (absent before 5.13, where the reader must say so); the
	// link dump with XDP by mode and the rtnl_link_stats64 dump;
	// programs and bpf_links by id; the netdev family (absent before
	// 6.3); AF_XDP socket diag (a module of Debian's 6.12).
	{pkg: "internal/kernel/ethtoolioctl"},
	{pkg: "internal/kernel/ethtoolnl"},
	{pkg: "internal/kernel/rtnl"},
	{pkg: "internal/kernel/bpfprog"},
	{pkg: "internal/kernel/netdev"},
	{pkg: "internal/kernel/xskdiag"},
	// The traffic-control hooks: tc filters on every kernel, tcx from
	// 6.6 and netkit from 6.7, unsupported before as the probe says.
	{pkg: "internal/kernel/tcprog"},
	// libxdp's dispatcher as Debian's xdp-loader builds it (freplace
	// on every kernel of the matrix): its components by slot, from the
	// freplace links (5.13) or libxdp's pins (5.10).
	{pkg: "internal/kernel/xdpdispatch"},
	// The uncore reader's open, read and scale through the software PMU:
	// perf_event_attr with config1 as each kernel takes it.
	{pkg: "internal/kernel/uncore"},
	// The observer of other programs: fexit on XDP programs.
	{pkg: "bpf/rxqobserve", arm64: true},
	{pkg: "lab/trafficgen", arm64: true},
	// The lab: namespaces, veth pairs, iptables' raw table, exact runs.
	{pkg: "lab"},
	// The real binary started as users start it, on the kernel that has
	// every default collector's feature (xsk_diag, the netdev family).
	// The churn test is left out, as the collector's: 1,000 scrapes
	// beside veth churn answer within their two-minute deadline on the
	// host, but under the emulator an ethtool update waits out the rtnl
	// lock behind the churn for over 90 s, and the test is of the
	// exporter's concurrency, which no kernel changes. TestVersion builds
	// the binary, which the guests leave to the host; the TestDocs tests
	// read the docs, which no kernel changes, with Node.js, which the
	// guests lack.
	{pkg: "cmd/xdp_exporter", skip: "TestConcurrentScrapesWithChurn|TestVersion|TestDocs", suites: []string{"trixie"}},
	// The other packages whose tests start the exporter, cmd/xdp-top and
	// e2e, compare rates over wall-clock windows (within 2% and 5%), which
	// the emulator's pace cannot hold (xdp-top's rxq total read -12% to
	// +46% of the generator's rate on 6.12): they run on the host.
}

type guestPackage struct {
	// run, where set, limits the package to the tests it matches.
	pkg, run, skip string
	// suites limits the package to these amd64 suites; every one when
	// empty.
	suites []string
	// arm64: the package runs on the arm64 guest too. What depends on the
	// architecture is the kernel's: its JIT of the exporter's BPF
	// programs, its trampolines under the observe mode's fexit, its
	// tracepoints' and maps' behaviour; those packages run there, with
	// the exact counts of check_test.go. The netlink and ioctl readers
	// decode layouts that are the same on every 64-bit little-endian
	// architecture, which the amd64 guests test.
	arm64 bool
}

// onSuite is the packages of pkgs that run on suite.
func onSuite(pkgs []guestPackage, suite vm.Suite) []guestPackage {
	var out []guestPackage
	for _, p := range pkgs {
		switch {
		case suite.Arch == "arm64" && p.arm64:
			if more := arm64Skip[p.pkg]; more != "" {
				p.skip = strings.TrimPrefix(p.skip+"|"+more, "|")
			}
			p.run = arm64Run[p.pkg]
			out = append(out, p)
		case suite.Arch == "amd64" && (len(p.suites) == 0 || slices.Contains(p.suites, suite.Name)):
			out = append(out, p)
		}
	}
	return out
}

// arm64Run limits packages to their tests of BPF programs on the arm64
// guest: of the collectors, those that load the exporter's objects (napi,
// monitor, rxq and its observe mode, drop) or read the kernel's programs
// (bpf). The rest read /proc, sysfs and netlink as on amd64; the whole
// package took 11 minutes in the arm64 guest alone, these 56 tests 8
// minutes beside another guest.
var arm64Run = map[string]string{
	"collector": "^Test(BPF|Drop|Napi|Rxq|XDP)",
}

// arm64Skip are tests left out on the arm64 guest, by package, and why.
var arm64Skip = map[string]string{
	// libxdp's AF_XDP program is built in the guest by the host's C
	// compiler against the host's libxdp (testdata/xskrecv.c), which the
	// arm64 root has not; the observe mode's fexit on a foreign program
	// is TestRxqObserve's, which runs there.
	"kernelmatrix": "TestXSKDefaultProgram",
}

// selectedPackages is guestPackages, or the subset packagesEnv names.
func selectedPackages(t *testing.T) []guestPackage {
	t.Helper()
	want := os.Getenv(packagesEnv)
	if want == "" {
		return guestPackages
	}
	var picked []guestPackage
	for _, name := range strings.Split(want, ",") {
		i := slices.IndexFunc(guestPackages, func(p guestPackage) bool { return p.pkg == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("%s: %q is not a package of the matrix", packagesEnv, name)
		}
		picked = append(picked, guestPackages[i])
	}
	return picked
}

// required are tests that must pass, not skip, on a suite, by package:
// what its kernel has where others do not.
var required = map[string]map[string][]string{
	"bullseye": {
		"kernelmatrix":   observeExporter,
		"bpf/rxqobserve": observeTests,
	},
	"bookworm": {
		"kernelmatrix":   observeExporter,
		"bpf/rxqobserve": observeTests,
	},
	"trixie": {
		"kernelmatrix":           append([]string{"TestXSKRealSocket"}, observeExporter...), // xsk_diag is a module of Debian's 6.12
		"bpf/drop":               {"TestDropSubsystemReasonNames"},                          // and openvswitch, with drop reasons (6.8+)
		"bpf/rxqobserve":         observeTests,
		"internal/kernel/tcprog": {"TestTCX"}, // tcx (6.6+)
	},
	// BPF trampolines on arm64 since 6.0: fexit counts there as on amd64.
	"trixie-arm64": {
		"kernelmatrix":   {"TestXSKRealSocket", "TestRxqObserve/counted", "TestRxqObserveComponents/counted", "TestExactCounts", "TestXDPExceptionsExact", "TestDropReasonsExact"},
		"bpf/drop":       {"TestDropSubsystemReasonNames"},
		"bpf/rxqobserve": observeTests,
	},
}

// Debian's kernels have BPF trampolines, so observe mode must count there,
// not report its programs unobservable.
var (
	observeExporter = []string{"TestRxqObserve/counted", "TestRxqObserveComponents/counted", "TestXSKDefaultProgram/counted"}
	observeTests    = []string{"TestObserveCounts/counted", "TestObserveTailCall/counted", "TestObserveDispatcher", "TestObserveComponents/counted"}
)

// TestKernelMatrix boots Debian's kernels in QEMU over this machine's root
// and runs, on each, the real exporter binary (check_test.go) and the
// test binaries of the packages that touch the kernel, all built here
// once. A failure in any guest fails the matrix with that guest's log;
// a kernel that cannot be fetched fails it too. The support table in
// docs/kernels.md must match what the guests' default exporters reported.
func TestKernelMatrix(t *testing.T) {
	testenv.Privileged(t)
	if err := vm.Available(); err != nil {
		testenv.Unavailable(t, "kernel matrix: %v", err)
		return
	}
	suites := selectedSuites(t)
	pkgs := selectedPackages(t)
	bins := buildForGuests(t, suites, pkgs)
	root := repoRoot()

	results := map[string]support.Support{}
	var mu sync.Mutex
	// The guests boot side by side, as many at once as the machine has
	// CPUs: under TCG each guest is one host thread (vm.start), so two
	// guests take about the time of the longer one, not their sum.
	// A guest that runs cmd/xdp_exporter's tests, which measure the
	// exporter's memory, runs with the machine to itself: beside another
	// guest its VmRSS with 100 veths was 50.7 MB (23.4 MB on the host),
	// the runtime returning memory later on a starved CPU. Benchmarks in
	// the guests run one guest at a time too.
	parallel := runtime.NumCPU()
	if os.Getenv(benchEnv) != "" {
		parallel = 1
	}
	slots := make(chan struct{}, parallel)
	var alone sync.RWMutex
	t.Run("guests", func(t *testing.T) {
		for _, s := range suites {
			t.Run(s.ID(), func(t *testing.T) {
				t.Parallel()
				if slices.ContainsFunc(onSuite(pkgs, s), func(p guestPackage) bool { return p.pkg == "cmd/xdp_exporter" }) {
					alone.Lock()
					defer alone.Unlock()
				} else {
					alone.RLock()
					defer alone.RUnlock()
				}
				slots <- struct{}{}
				defer func() { <-slots }()
				sup, ok := runSuite(t, s, pkgs, bins[s.Arch], root)
				if ok {
					mu.Lock()
					results[s.Key()] = sup
					mu.Unlock()
				}
			})
		}
	})
	if len(suites) < len(vm.Suites) || len(pkgs) < len(guestPackages) || os.Getenv(benchEnv) != "" || t.Failed() {
		return
	}
	checkRecording(t, results)
}

// runSuite boots one suite's guest, runs the packages' tests there and
// checks their logs; ok with the guest's support report when the whole
// matrix runs.
func runSuite(t *testing.T, s vm.Suite, pkgs []guestPackage, bin, root string) (sup support.Support, ok bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	k, err := vm.Fetch(ctx, s.Name, s.Arch)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	var console strings.Builder
	start := time.Now()
	onThis := onSuite(pkgs, s)
	err = vm.Run(ctx, vm.Config{Kernel: k, Script: guestScript(root, bin, onThis), Out: out, Console: &console, HostPaths: []string{bin}})
	t.Logf("Debian %s, Linux %s (%s): booted and checked in %s", s.ID(), k.Version, s.Key(), time.Since(start).Round(time.Second))
	logHarness(t, console.String())
	for _, p := range onThis {
		logf := filepath.Join(out, logName(p.pkg))
		b, rerr := os.ReadFile(logf)
		if rerr != nil {
			t.Errorf("%s: no log of %s's tests: %v", k.Version, p.pkg, rerr)
			continue
		}
		if os.Getenv(benchEnv) != "" {
			t.Logf("%s on %s:\n%s", p.pkg, k.Version, b)
			continue
		}
		t.Logf("%s on %s: %s", p.pkg, k.Version, summary(b))
		for _, name := range required[s.ID()][p.pkg] {
			if !strings.Contains(string(b), "--- PASS: "+name+" ") {
				t.Errorf("%s must pass on %s, which has what it needs; it did not:\n%s", name, k.Version, b)
			}
		}
		if failed := failures(b); failed != "" {
			t.Errorf("%s's tests failed on %s (Debian %s):\n%s", p.pkg, k.Version, s.ID(), failed)
		}
	}
	if err != nil {
		t.Fatalf("%v\nguest console:\n%s", err, console.String())
	}
	if len(pkgs) < len(guestPackages) || os.Getenv(benchEnv) != "" {
		return sup, false
	}
	b, err := os.ReadFile(filepath.Join(out, "support.json"))
	if err != nil {
		t.Fatalf("the guest wrote no support report: %v", err)
	}
	if err := json.Unmarshal(b, &sup); err != nil {
		t.Fatal(err)
	}
	return sup, true
}

// guestScript runs each package's test binary in its source directory,
// as go test does, logging to the shared output directory; it exits
// non-zero when any failed.
func guestScript(root, bin string, pkgs []guestPackage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "export XDP_EXPORTER_REQUIRE_PRIVILEGED=1 XDP_EXPORTER_BINARY=%s/xdp_exporter\n", bin)
	b.WriteString("export " + supportOutEnv + "=\"$XDPVM_OUT/support.json\"\n")
	b.WriteString("status=0\n")
	// Frames through AF_PACKET (trafficgen.MethodEnv): under the emulator,
	// live frames outrun NAPI on 6.1 and lose some at veth's ring.
	b.WriteString("export " + trafficgen.MethodEnv + "=packet\n")
	// eth0 receives what eth1 sends when it comes up (IPv6 neighbour
	// discovery): wait for it, as the qstats test needs traffic.
	b.WriteString("for i in $(seq 100); do [ \"$(cat /sys/class/net/eth0/statistics/rx_packets)\" -gt 0 ] && break; sleep 0.1; done\n")
	for _, p := range pkgs {
		args := "-test.v -test.count=1 -test.timeout=15m"
		switch bench := os.Getenv(benchEnv); {
		case bench != "":
			args += fmt.Sprintf(" -test.run '^$' -test.bench '%s' -test.benchtime %s", bench, cmp.Or(os.Getenv(benchTimeEnv), "11x"))
		default:
			if p.run != "" {
				args += fmt.Sprintf(" -test.run '%s'", p.run)
			}
			if p.skip != "" {
				args += fmt.Sprintf(" -test.skip '%s'", p.skip)
			}
		}
		fmt.Fprintf(&b, "echo \"== %s\"\n", p.pkg)
		fmt.Fprintf(&b, "(cd %s/%s && %s/%s %s) >\"$XDPVM_OUT/%s\" 2>&1 || status=1\n",
			root, p.pkg, bin, testBinary(p.pkg), args, logName(p.pkg))
	}
	b.WriteString("exit $status\n")
	return b.String()
}

// buildForGuests builds the exporter and the guest packages' test
// binaries, static, for each architecture of suites, into one directory
// per architecture that the guests see through the shared root: the
// directory by architecture.
func buildForGuests(t *testing.T, suites []vm.Suite, pkgs []guestPackage) map[string]string {
	t.Helper()
	byArch := map[string][]string{}
	for _, s := range suites {
		for _, p := range onSuite(pkgs, s) {
			if !slices.Contains(byArch[s.Arch], p.pkg) {
				byArch[s.Arch] = append(byArch[s.Arch], p.pkg)
			}
		}
	}
	bins := map[string]string{}
	for arch, onArch := range byArch {
		bins[arch] = buildStatic(t, arch, func(dir string) [][]string {
			cmds := [][]string{{"go", "build", "-o", filepath.Join(dir, "xdp_exporter"), "./cmd/xdp_exporter"}}
			for _, pkg := range onArch {
				cmds = append(cmds, []string{"go", "test", "-c", "-o", filepath.Join(dir, testBinary(pkg)), "./" + pkg})
			}
			return cmds
		})
	}
	return bins
}

// buildStatic runs the build commands cmds(dir) in the repository with
// cgo off, for arch, into a fresh directory under /var/tmp, which the
// guests see through the shared root, and returns the directory.
func buildStatic(t *testing.T, arch string, cmds func(dir string) [][]string) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "xdp-kernels-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, c := range cmds(dir) {
		cmd := exec.Command(c[0], c[1:]...)
		cmd.Dir = repoRoot()
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+arch)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v\n%s", strings.Join(c, " "), err, out)
		}
	}
	return dir
}

func selectedSuites(t *testing.T) []vm.Suite {
	t.Helper()
	want := os.Getenv(suitesEnv)
	if want == "" {
		return vm.Suites
	}
	var picked []vm.Suite
	for _, name := range strings.Split(want, ",") {
		i := slices.IndexFunc(vm.Suites, func(s vm.Suite) bool { return s.ID() == strings.TrimSpace(name) })
		if i < 0 {
			t.Fatalf("%s: unknown suite %q (the matrix has bullseye, bookworm, trixie, trixie-arm64)", suitesEnv, name)
		}
		picked = append(picked, vm.Suites[i])
	}
	return picked
}

// logHarness repeats what vm said about a guest's boots (a fallback from
// KVM, a second boot after a panic), which passing runs must show too.
func logHarness(t *testing.T, console string) {
	for _, line := range strings.Split(console, "\n") {
		if strings.HasPrefix(line, "vm: ") {
			t.Log(line)
		}
	}
}

func testBinary(pkg string) string { return filepath.Base(pkg) + ".test" }
func logName(pkg string) string    { return strings.ReplaceAll(pkg, "/", "_") + ".log" }

// resultLine matches go test's verdict lines in -test.v output.
var resultLine = regexp.MustCompile(`(?m)^\s*--- (PASS|FAIL|SKIP): `)

// summary counts a test binary's verdicts.
func summary(log []byte) string {
	n := map[string]int{}
	for _, m := range resultLine.FindAllSubmatch(log, -1) {
		n[string(m[1])]++
	}
	return fmt.Sprintf("%d passed, %d failed, %d skipped", n["PASS"], n["FAIL"], n["SKIP"])
}

// failures returns the output of each failed test (its lines up to its
// verdict), or "" when the binary passed.
func failures(log []byte) string {
	lines := strings.Split(string(log), "\n")
	var out []string
	start := 0
	for i, l := range lines {
		if strings.HasPrefix(l, "=== RUN") && !strings.Contains(l, "/") {
			start = i
		}
		if strings.HasPrefix(strings.TrimSpace(l), "--- FAIL") && !strings.HasPrefix(l, " ") {
			out = append(out, lines[start:i+1]...)
		}
	}
	ok := false
	for _, l := range lines {
		if l == "PASS" {
			ok = true
		}
	}
	if len(out) == 0 && !ok {
		tail := lines[max(0, len(lines)-40):]
		return "the test binary did not finish with PASS:\n" + strings.Join(tail, "\n")
	}
	return strings.Join(out, "\n")
}

func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(here))
}
