package collector

import (
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/safchain/ethtool"
	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci/pcitest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// pcieFixture is pcitest's two-socket host as the collector's config.
func pcieFixture(t testing.TB) PCIeConfig {
	sys, proc := pcitest.TwoSocketHost(t)
	return PCIeConfig{SysFS: sys, ProcFS: proc}
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
	if got := mfs.Value(t, "xdp_pcie_device_info", "device", "mlx5p0", "pci_address", "0000:03:00.0", "numa_node", "1"); got != 1 {
		t.Errorf("mlx5p0 info = %v", got)
	}
	if got := mfs.Value(t, "xdp_pcie_device_info", "device", "eth1", "pci_address", "0000:00:03.0", "numa_node", "-1"); got != 1 {
		t.Errorf("eth1 info = %v", got)
	}
	for _, dev := range []string{"veth0", "usb0"} {
		if _, n := mfs.Sum("xdp_pcie_device_info", "device", dev); n != 0 {
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
			if got := mfs.Value(t, fam, l...); math.Abs(got-want) > want*1e-12 {
				t.Errorf("%s{hop=%s} = %v, want %v", fam, h.hop, got, want)
			}
		}
	}
	if got := mfs.Value(t, "xdp_pcie_link_degraded", "device", "mlx5p0", "hop", "0", "pci_address", "0000:03:00.0"); got != 1 {
		t.Errorf("the NIC's x8 link where both ends do x16 is not degraded: %v", got)
	}
	if got := mfs.Value(t, "xdp_pcie_link_degraded", "device", "mlx5p0", "hop", "2", "pci_address", "0000:01:00.0"); got != 0 {
		t.Errorf("the switch's x8 link into a x8 root port is degraded: %v", got)
	}
	if _, n := mfs.Sum("xdp_pcie_link_degraded", "hop", "1"); n != 0 {
		t.Error("a port above a link has a degraded series of its own")
	}
	if _, n := mfs.Sum("xdp_pcie_link_width_lanes", "device", "eth1"); n != 0 {
		t.Error("eth1 sits on conventional PCI, without link files, yet has link series")
	}
	checkPCIeAER(t, mfs)
	checkPCIeNUMA(t, mfs)
}

// checkPCIeAER checks the fixture NIC's AER counts by name, without the
// totals.
func checkPCIeAER(t *testing.T, mfs exportertest.Families) {
	t.Helper()
	for _, e := range []struct {
		severity, name string
		want           float64
	}{{"correctable", "RxErr", 3}, {"correctable", "BadTLP", 12}, {"correctable", "Timeout", 1}, {"nonfatal", "CmpltTO", 2}, {"fatal", "MalfTLP", 0}} {
		if got := mfs.Value(t, "xdp_pcie_aer_errors_total", "device", "mlx5p0", "hop", "0", "class", e.severity, "error", e.name); got != e.want {
			t.Errorf("AER %s %s = %v, want %v", e.severity, e.name, got, e.want)
		}
	}
	if sum, n := mfs.Sum("xdp_pcie_aer_errors_total", "class", "correctable"); n != 8 || sum != 16 {
		t.Errorf("correctable AER: %d series summing to %v, want the 8 names summing to TOTAL_ERR_COR 16", n, sum)
	}
	if _, n := mfs.Sum("xdp_pcie_aer_errors_total", "device", "eth1"); n != 0 {
		t.Error("eth1 has no AER files, yet has AER series")
	}
}

// checkPCIeNUMA checks the NUMA locality of the fixture NIC's RX queue
// IRQs and of each CPU.
func checkPCIeNUMA(t *testing.T, mfs exportertest.Families) {
	t.Helper()
	for _, q := range []struct {
		queue, irq string
		want       float64
	}{{"0", "40", 1}, {"1", "41", 0}, {"2", "42", 0}, {"3", "43", 0.5}} {
		if got := mfs.Value(t, "xdp_pcie_rx_queue_numa_remote_ratio", "device", "mlx5p0", "queue", q.queue, "irq", q.irq); got != q.want {
			t.Errorf("queue %s remote ratio = %v, want %v", q.queue, got, q.want)
		}
	}
	for q, want := range []float64{1000, 2000, 3000 * 2, 4000 * 2} {
		if got := mfs.Value(t, "xdp_pcie_rx_queue_interrupts_total", "device", "mlx5p0", "queue", strconv.Itoa(q), "irq", strconv.Itoa(40+q)); got != want {
			t.Errorf("queue %d: %v interrupts, want %v (its /proc/interrupts row summed)", q, got, want)
		}
	}
	if _, n := mfs.Sum("xdp_pcie_rx_queue_interrupts_total"); n != 4 {
		t.Errorf("%d queue interrupt series, want mlx5p0's 4 queues alone", n)
	}
	if _, n := mfs.Sum("xdp_pcie_rx_queue_numa_remote_ratio", "irq", "39"); n != 0 {
		t.Error("the async event IRQ is taken for a queue")
	}
	nodes := mfs.Values("xdp_pcie_cpu_info", "cpu")
	if len(nodes) != 8 {
		t.Errorf("%d CPUs with a node, want the fixture's 8", len(nodes))
	}
	for cpu := range 8 {
		want := map[bool]string{true: "0", false: "1"}[cpu < 4]
		mfs.Value(t, "xdp_pcie_cpu_info", "cpu", strconv.Itoa(cpu), "numa_node", want)
	}
	mfs.Value(t, "xdp_pcie_device_info", "device", "mlx5p0", "numa_node", "1")
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
		listed, n := mfs.Sum("xdp_pcie_device_info", "device", name)
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
		if got := mfs.Value(t, "xdp_pcie_device_info", "device", name, "pci_address", info.BusInfo, "numa_node", strings.TrimSpace(string(node))); got != 1 || listed != 1 {
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
