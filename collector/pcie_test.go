package collector

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// The AER files as the kernel prints them (drivers/pci/pcie/aer.c, the
// example of Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats),
// with errors counted on a NIC whose link retrains.
const (
	aerCorrectable = "RxErr 3\nBadTLP 12\nBadDLLP 0\nRollover 0\nTimeout 1\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 16\n"
	aerNonFatal    = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 2\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nTOTAL_ERR_NONFATAL 2\n"
	aerFatal       = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nTOTAL_ERR_FATAL 0\n"
)

// pcieFixture writes a sysfs and a /proc/irq tree as a two-socket host
// shows them:
//   - mlx5p0 (0000:03:00.0, a x16 Gen4 ConnectX on node 1) behind a
//     switch (0000:02:01.0 downstream, 0000:01:00.0 upstream) in a x8
//     root port, 0000:00:01.0. The NIC's link trained at 8 GT/s x8 where
//     both ends can do 16 GT/s x16 (degraded); the switch's link to the
//     root port runs x8, all the root port can do (not degraded). AER
//     counts errors; four RX queues on IRQs mlx5_comp0..3 whose
//     effective CPUs are remote, local, local, and one of each;
//   - eth1, a virtio NIC on conventional PCI (0000:00:03.0, no link
//     files, no NUMA node, no AER);
//   - usb0, a USB NIC below the host controller's function;
//   - veth0, virtual.
func pcieFixture(t testing.TB) PCIeConfig {
	t.Helper()
	root := t.TempDir()
	sys, irq := filepath.Join(root, "sys"), filepath.Join(root, "proc", "irq")
	write := func(path, content string) { writeTreeFile(t, path, content) }
	link := func(target, name string) { symlinkTree(t, target, name) }
	linkFiles := func(dir, speed, width, maxSpeed, maxWidth string) {
		write(filepath.Join(dir, "current_link_speed"), speed+"\n")
		write(filepath.Join(dir, "current_link_width"), width+"\n")
		write(filepath.Join(dir, "max_link_speed"), maxSpeed+"\n")
		write(filepath.Join(dir, "max_link_width"), maxWidth+"\n")
	}
	write(filepath.Join(sys, "bus", "pci", "drivers_autoprobe"), "1\n")
	rp := filepath.Join(sys, "devices", "pci0000:00", "0000:00:01.0")
	up := filepath.Join(rp, "0000:01:00.0")
	down := filepath.Join(up, "0000:02:01.0")
	nic := filepath.Join(down, "0000:03:00.0")
	linkFiles(rp, "16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "8")
	linkFiles(up, "16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16")
	linkFiles(down, "8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16")
	linkFiles(nic, "8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16")
	write(filepath.Join(nic, "numa_node"), "1\n")
	write(filepath.Join(nic, "aer_dev_correctable"), aerCorrectable)
	write(filepath.Join(nic, "aer_dev_nonfatal"), aerNonFatal)
	write(filepath.Join(nic, "aer_dev_fatal"), aerFatal)
	write(filepath.Join(nic, "net", "mlx5p0", "ifindex"), "4\n")
	link("../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:03:00.0/net/mlx5p0", filepath.Join(sys, "class", "net", "mlx5p0"))
	link("../../../0000:03:00.0", filepath.Join(nic, "net", "mlx5p0", "device"))
	for i, cpus := range []string{"0", "4", "5-6", "2,5"} {
		n := 40 + i
		write(filepath.Join(nic, "msi_irqs", strconv.Itoa(n)), "msix\n")
		write(filepath.Join(irq, strconv.Itoa(n), "effective_affinity_list"), cpus+"\n")
		if err := os.MkdirAll(filepath.Join(irq, strconv.Itoa(n), "mlx5_comp"+strconv.Itoa(i)+"@pci:0000:03:00.0"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The async event vector serves no queue.
	write(filepath.Join(nic, "msi_irqs", "39"), "msix\n")
	write(filepath.Join(irq, "39", "effective_affinity_list"), "1\n")
	if err := os.MkdirAll(filepath.Join(irq, "39", "mlx5_async0@pci:0000:03:00.0"), 0o755); err != nil {
		t.Fatal(err)
	}

	virtio := filepath.Join(sys, "devices", "pci0000:00", "0000:00:03.0")
	write(filepath.Join(virtio, "numa_node"), "-1\n")
	write(filepath.Join(virtio, "virtio2", "net", "eth1", "ifindex"), "2\n")
	link("../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth1", filepath.Join(sys, "class", "net", "eth1"))
	link("../../../virtio2", filepath.Join(virtio, "virtio2", "net", "eth1", "device"))

	// A USB NIC: its device is a USB interface below the host
	// controller's PCI function, which is not the NIC's.
	usb := filepath.Join(sys, "devices", "pci0000:00", "0000:00:14.0", "usb2", "2-1", "2-1:1.0")
	linkFiles(filepath.Join(sys, "devices", "pci0000:00", "0000:00:14.0"), "5.0 GT/s PCIe", "1", "5.0 GT/s PCIe", "1")
	write(filepath.Join(usb, "net", "usb0", "ifindex"), "6\n")
	link("../../devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/net/usb0", filepath.Join(sys, "class", "net", "usb0"))
	link("../../../2-1:1.0", filepath.Join(usb, "net", "usb0", "device"))

	write(filepath.Join(sys, "devices", "virtual", "net", "veth0", "ifindex"), "5\n")
	link("../../devices/virtual/net/veth0", filepath.Join(sys, "class", "net", "veth0"))

	write(filepath.Join(sys, "devices", "system", "node", "node0", "cpulist"), "0-3\n")
	write(filepath.Join(sys, "devices", "system", "node", "node1", "cpulist"), "4-7\n")
	return PCIeConfig{SysFS: sys, ProcFS: filepath.Dir(irq)}
}

// writeTreeFile writes path, making its directories.
func writeTreeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// symlinkTree makes the symlink name to target, making its directories.
func symlinkTree(t testing.TB, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}

func newFixturePCIe(t testing.TB, cfg PCIeConfig) Collector {
	t.Helper()
	c, err := NewPCIeCollector(cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	pc := c.(*pcieCollector)
	pc.netdev = nil // the fixture's queues are named by their IRQs
	return onLinks{c, newLinks([]Link{{Index: 2, Name: "eth1"}, {Index: 4, Name: "mlx5p0"}, {Index: 5, Name: "veth0"}, {Index: 6, Name: "usb0"}})}
}

// TestPCIeFixture reads the two-socket fixture: the NIC's path with each
// hop's link, the degraded hops, the bandwidth of the link as trained,
// AER by name without the totals, and the NUMA locality of each RX
// queue's IRQ and of each CPU.
func TestPCIeFixture(t *testing.T) {
	mfs := gather(t, newFixturePCIe(t, pcieFixture(t)))
	if got := value(t, mfs, "xdp_pcie_device_info", "device", "mlx5p0", "pci_address", "0000:03:00.0", "numa_node", "1"); got != 1 {
		t.Errorf("mlx5p0 info = %v", got)
	}
	if got := value(t, mfs, "xdp_pcie_device_info", "device", "eth1", "pci_address", "0000:00:03.0", "numa_node", "-1"); got != 1 {
		t.Errorf("eth1 info = %v", got)
	}
	for _, dev := range []string{"veth0", "usb0"} {
		if _, n := exportertest.Match(mfs, "xdp_pcie_device_info", "device", dev); n != 0 {
			t.Errorf("%s has no PCI function of its own but is listed", dev)
		}
	}
	for _, h := range []struct {
		hop, addr               string
		speed, maxSpeed         float64
		width, maxWidth         float64
		bandwidthBytesPerSecond float64
	}{
		{"0", "0000:03:00.0", 8e9, 16e9, 8, 16, 8e9 * 8 * 128 / 130 / 8},
		{"1", "0000:02:01.0", 8e9, 16e9, 8, 16, 8e9 * 8 * 128 / 130 / 8},
		{"2", "0000:01:00.0", 16e9, 16e9, 8, 16, 16e9 * 8 * 128 / 130 / 8},
		{"3", "0000:00:01.0", 16e9, 16e9, 8, 8, 16e9 * 8 * 128 / 130 / 8},
	} {
		l := []string{"device", "mlx5p0", "hop", h.hop, "pci_address", h.addr}
		for fam, want := range map[string]float64{
			"xdp_pcie_link_speed_transfers_per_second":     h.speed,
			"xdp_pcie_link_max_speed_transfers_per_second": h.maxSpeed,
			"xdp_pcie_link_width_lanes":                    h.width,
			"xdp_pcie_link_max_width_lanes":                h.maxWidth,
			"xdp_pcie_link_bandwidth_bytes_per_second":     h.bandwidthBytesPerSecond,
		} {
			if got := value(t, mfs, fam, l...); math.Abs(got-want) > want*1e-12 {
				t.Errorf("%s{hop=%s} = %v, want %v", fam, h.hop, got, want)
			}
		}
	}
	if got := value(t, mfs, "xdp_pcie_link_degraded", "device", "mlx5p0", "hop", "0", "pci_address", "0000:03:00.0"); got != 1 {
		t.Errorf("the NIC's x8 link where both ends do x16 is not degraded: %v", got)
	}
	if got := value(t, mfs, "xdp_pcie_link_degraded", "device", "mlx5p0", "hop", "2", "pci_address", "0000:01:00.0"); got != 0 {
		t.Errorf("the switch's x8 link into a x8 root port is degraded: %v", got)
	}
	if _, n := exportertest.Match(mfs, "xdp_pcie_link_degraded", "hop", "1"); n != 0 {
		t.Error("a port above a link has a degraded series of its own")
	}
	if _, n := exportertest.Match(mfs, "xdp_pcie_link_width_lanes", "device", "eth1"); n != 0 {
		t.Error("eth1 sits on conventional PCI, without link files, yet has link series")
	}
	checkPCIeAER(t, mfs)
	checkPCIeNUMA(t, mfs)
}

// checkPCIeAER checks the fixture NIC's AER counts by name, without the
// totals.
func checkPCIeAER(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	for _, e := range []struct {
		severity, name string
		want           float64
	}{{"correctable", "RxErr", 3}, {"correctable", "BadTLP", 12}, {"correctable", "Timeout", 1}, {"nonfatal", "CmpltTO", 2}, {"fatal", "MalfTLP", 0}} {
		if got := value(t, mfs, "xdp_pcie_aer_errors_total", "device", "mlx5p0", "hop", "0", "type", e.severity, "error", e.name); got != e.want {
			t.Errorf("AER %s %s = %v, want %v", e.severity, e.name, got, e.want)
		}
	}
	if sum, n := exportertest.Match(mfs, "xdp_pcie_aer_errors_total", "type", "correctable"); n != 8 || sum != 16 {
		t.Errorf("correctable AER: %d series summing to %v, want the 8 names summing to TOTAL_ERR_COR 16", n, sum)
	}
	if _, n := exportertest.Match(mfs, "xdp_pcie_aer_errors_total", "device", "eth1"); n != 0 {
		t.Error("eth1 has no AER files, yet has AER series")
	}
}

// checkPCIeNUMA checks the NUMA locality of the fixture NIC's RX queue
// IRQs and of each CPU.
func checkPCIeNUMA(t *testing.T, mfs map[string]*dto.MetricFamily) {
	t.Helper()
	for _, q := range []struct {
		queue, irq, cpus string
		want             float64
	}{{"0", "40", "0", 1}, {"1", "41", "4", 0}, {"2", "42", "5-6", 0}, {"3", "43", "2,5", 0.5}} {
		if got := value(t, mfs, "xdp_pcie_rx_queue_numa_remote_ratio", "device", "mlx5p0", "queue", q.queue, "irq", q.irq, "effective_cpus", q.cpus); got != q.want {
			t.Errorf("queue %s remote ratio = %v, want %v", q.queue, got, q.want)
		}
	}
	if _, n := exportertest.Match(mfs, "xdp_pcie_rx_queue_numa_remote_ratio", "irq", "39"); n != 0 {
		t.Error("the async event IRQ is taken for a queue")
	}
	remote, n := exportertest.Match(mfs, "xdp_pcie_cpu_numa_remote", "device", "mlx5p0")
	if n != 8 || remote != 4 {
		t.Errorf("mlx5p0: %d CPUs with %v remote, want 8 with 4 (CPUs 0-3 on node 0)", n, remote)
	}
	if got := value(t, mfs, "xdp_pcie_cpu_numa_remote", "device", "mlx5p0", "cpu", "5"); got != 0 {
		t.Errorf("CPU 5 (node 1) counted remote from a node-1 NIC")
	}
	if _, n := exportertest.Match(mfs, "xdp_pcie_cpu_numa_remote", "device", "eth1"); n != 0 {
		t.Error("eth1 has no NUMA node, yet its CPUs are classified")
	}
}

// TestPCIeNoPCIBus: a sysfs without /sys/bus/pci (a container, a board
// without PCI) makes the collector unsupported, not failed.
func TestPCIeNoPCIBus(t *testing.T) {
	_, err := NewPCIeCollector(PCIeConfig{SysFS: t.TempDir()}, slog.New(slog.DiscardHandler))
	if err == nil || !unsupportedOnly(err) {
		t.Fatalf("want unsupported, got %v", err)
	}
}

// TestPCIeRealSysfs reads this machine's sysfs: every device that ethtool
// says is on PCI (its bus-info is a PCI address) is listed with that
// address and the NUMA node sysfs gives its function, and a veth is not.
func TestPCIeRealSysfs(t *testing.T) {
	links, err := netlink.LinkList()
	if err != nil {
		t.Fatal(err)
	}
	et, err := ethtool.NewEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer et.Close()
	c, err := NewPCIeCollector(PCIeConfig{}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	mfs := gather(t, c)
	onPCI := 0
	for _, l := range links {
		name := l.Attrs().Name
		info, err := et.DriverInfo(name)
		listed, n := exportertest.Match(mfs, "xdp_pcie_device_info", "device", name)
		if err != nil || !pci.IsAddress(info.BusInfo) {
			if n != 0 {
				t.Errorf("%s (bus %q) is not on PCI but listed", name, info.BusInfo)
			}
			continue
		}
		onPCI++
		node, err := os.ReadFile(filepath.Join("/sys/bus/pci/devices", info.BusInfo, "numa_node"))
		if err != nil {
			t.Fatal(err)
		}
		if got := value(t, mfs, "xdp_pcie_device_info", "device", name, "pci_address", info.BusInfo, "numa_node", strings.TrimSpace(string(node))); got != 1 || listed != 1 {
			t.Errorf("%s on %s: info %v", name, info.BusInfo, got)
		}
	}
	if onPCI == 0 {
		testenv.Unavailable(t, "this machine has no network device on PCI: its sysfs shows nothing to compare")
	}
	t.Logf("%d PCI network devices", onPCI)
}

// BenchmarkPCIeUpdate is one scrape of the two-socket fixture: the NIC's
// four hops, AER, the node CPU lists and four RX queue IRQs.
func BenchmarkPCIeUpdate(b *testing.B) {
	benchUpdate(b, newFixturePCIe(b, pcieFixture(b)))
}
