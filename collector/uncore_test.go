package collector

import (
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci/pcitest"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/uncore"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestUncoreOnThisHost builds the collector as the exporter does, on
// this host's sysfs: unsupported where the kernel registered no uncore
// PMU (a VM), working where it did.
func TestUncoreOnThisHost(t *testing.T) {
	testenv.Privileged(t)
	_, probe := uncore.Discover("/sys")
	c, err := NewUncoreCollector(slog.New(slog.DiscardHandler), Shared{})
	switch {
	case errors.Is(probe, uncore.ErrNoPMU):
		if !unsupportedOnly(err) {
			t.Fatalf("no uncore PMU here (%v), yet the collector says %v, not unsupported", probe, err)
		}
		t.Logf("unsupported, as the host has no uncore PMU: %v", err)
	case err != nil:
		t.Fatalf("uncore PMUs registered, collector failed: %v", err)
	default:
		gather(t, c)
		c.Close()
	}
}

// uncoreFixture is a two-socket host (CPU 0 on package 0, CPU 1 on
// package 1) with one IIO stack per socket, root buses 0000:3a and
// 0000:ae, and one NIC behind each; its free-running bw_in_port0 is
// backed by the software PMU's cpu-clock (PERF_TYPE_SOFTWARE, config
// 0), so that it counts on any host. The CPU is not one of the uncore
// table's models.
func uncoreFixture(t *testing.T) Shared {
	root := t.TempDir()
	sys, proc := filepath.Join(root, "sys"), filepath.Join(root, "proc")
	write := func(path, content string) { pcitest.WriteFile(t, filepath.Join(sys, path), content) }
	pcitest.WriteFile(t, filepath.Join(proc, "cpuinfo"), "processor\t: 0\nvendor_id\t: AuthenticAMD\ncpu family\t: 25\nmodel\t\t: 17\nmodel name\t: AMD EPYC 9654\nstepping\t: 1\n\n")
	for cpu, pkg := range []string{"0", "1"} {
		write("devices/system/cpu/cpu"+strconv.Itoa(cpu)+"/topology/physical_package_id", pkg+"\n")
	}
	pmus := "bus/event_source/devices/"
	write(pmus+"uncore_iio_0/type", "30\n")
	write(pmus+"uncore_iio_0/cpumask", "0-1\n")
	write(pmus+"uncore_iio_0/die0", "0000:3a\n")
	write(pmus+"uncore_iio_0/die1", "0000:ae\n")
	write(pmus+"uncore_iio_0/format/event", "config:0-7\n")
	free := pmus + "uncore_iio_free_running_0/"
	write(free+"type", "1\n")
	write(free+"cpumask", "0-1\n")
	write(free+"format/event", "config:0-7\n")
	write(free+"format/umask", "config:8-15\n")
	write(free+"events/bw_in_port0", "event=0x0,umask=0x0\n")
	write(free+"events/bw_in_port0.scale", "3.814697266e-6\n")
	write(free+"events/bw_in_port0.unit", "MiB\n")
	for nic, path := range map[string]string{"eth0": "pci0000:3a/0000:3a:00.0/0000:3b:00.0", "eth1": "pci0000:ae/0000:ae:02.0/0000:af:00.0"} {
		write("devices/"+path+"/vendor", "0x15b3\n")
		pcitest.Symlink(t, filepath.Join("..", "..", "..", "devices", path), filepath.Join(sys, "class", "net", nic, "device"))
	}
	return Shared{SysFS: sys, ProcFS: proc}
}

// TestUncoreFixtureMapsNICs: each NIC is labelled with the stack of its
// root bus on its socket, and the stacks' free-running counters are read
// through perf_event_open on the cpumask CPU of each socket.
func TestUncoreFixtureMapsNICs(t *testing.T) {
	testenv.Privileged(t)
	c, err := NewUncoreCollector(slog.New(slog.DiscardHandler), uncoreFixture(t))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mfs := gather(t, onLinks{c, newLinks([]Link{{Index: 2, Name: "eth0"}, {Index: 3, Name: "eth1"}, {Index: 4, Name: "veth0"}})})
	for _, w := range []struct{ device, socket, bus string }{{"eth0", "0", "0000:3a"}, {"eth1", "1", "0000:ae"}} {
		if v := mfs.Value(t, "xdp_uncore_iio_device_info", "device", w.device, "socket", w.socket, "iio", "0", "root_bus", w.bus); v != 1 {
			t.Errorf("%s: info %v", w.device, v)
		}
		if v := mfs.Value(t, "xdp_uncore_iio_free_running_bytes_total", "socket", w.socket, "iio", "0", "root_bus", w.bus, "port", "0", "flow", "in"); v <= 0 {
			t.Errorf("socket %s: free-running bytes %v", w.socket, v)
		}
	}
	if n := len(mfs["xdp_uncore_iio_device_info"].GetMetric()); n != 2 {
		t.Errorf("%d device info series, want eth0 and eth1 (veth0 has no PCI function)", n)
	}
	if v := mfs.Value(t, "xdp_uncore_event_available", "event", uncore.KindFreeRunning); v != 1 {
		t.Errorf("free-running available %v", v)
	}
}

const uncoreChildEnv = "XDP_EXPORTER_UNCORE_EACCES_CHILD"

// TestUncorePermissionDenied: as nobody (no CAP_PERFMON, paranoid 2) on
// a host that has the counters (the fixture's), the collector fails (it
// is not unsupported) and says what is missing.
func TestUncorePermissionDenied(t *testing.T) {
	if os.Getenv(uncoreChildEnv) == "1" {
		_, err := NewUncoreCollector(slog.New(slog.DiscardHandler), uncoreFixture(t))
		os.Stdout.WriteString("child error: " + errString(err) + "\n")
		if unsupportedOnly(err) {
			os.Stdout.WriteString("child: reported unsupported\n")
		}
		return
	}
	out := string(runAsNobody(t, "TestUncorePermissionDenied", uncoreChildEnv))
	for _, want := range []string{"perf uncore_iio_free_running_0/bw_in_port0 on CPU 0: permission denied", "CAP_PERFMON", "perf_event_paranoid"} {
		if !strings.Contains(out, want) {
			t.Errorf("child output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "reported unsupported") {
		t.Errorf("a refusal for lack of permission was reported unsupported:\n%s", out)
	}
}
