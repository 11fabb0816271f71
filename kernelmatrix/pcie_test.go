package kernelmatrix

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/vm"
	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// The topology TestPCIeTopology asks QEMU for, on a q35 guest whose CPU 0
// and CPU 1 are NUMA nodes 0 and 1:
//   - eth3: a virtio-net NIC behind root port 0000:40:00.0 of a PCIe
//     expander bus on node 1 (pxb-pcie numa_node=1); QEMU's root port
//     advertises 16 GT/s x32 by default;
//   - eth2: a virtio-net NIC behind root port 0000:00:10.0 on the main bus
//     (no node), whose link QEMU is told to make 2.5 GT/s x1.
//
// Both NICs sit on a hub of their own: what eth2 sends, eth3 receives.
var pcieTopology = []string{
	"-device", "pxb-pcie,id=pxb1,bus_nr=64,numa_node=1,bus=pcie.0,addr=0x0f",
	"-device", "pcie-root-port,id=rp1,bus=pxb1,chassis=1,slot=1",
	"-netdev", "hubport,id=pcie2,hubid=1", "-device", "virtio-net-pci,netdev=pcie2,bus=rp1",
	"-device", "pcie-root-port,id=rp2,bus=pcie.0,addr=0x10,chassis=2,slot=2,x-speed=2_5,x-width=1",
	"-netdev", "hubport,id=pcie3,hubid=1", "-device", "virtio-net-pci,netdev=pcie3,bus=rp2",
}

const (
	pcieFrames = 500 // per CPU step
	aerErrors  = 5
)

// TestPCIeTopology boots Debian's 6.12 with pcieTopology and runs
// kernelmatrix/internal/pcieguest there: the exporter's pcie collector must report the
// topology QEMU was told to build (addresses, NUMA nodes, each port's
// link), count exactly the correctable errors injected into eth3's root
// port through the kernel's aer_inject, and follow eth3's RX IRQ as it
// moves from CPU 0 (remote from eth3's node) to CPU 1 (local), with the
// rxq collector's per-CPU packets on the CPU the IRQ was moved to.
//
// QEMU 7.2's virtio-net advertises 2.5 GT/s x1, so no port setting can
// train its link below what both ends can do: xdp_pcie_link_degraded is
// 0 here, and the degraded case is in the collector's fixtures.
func TestPCIeTopology(t *testing.T) {
	g, ok := trixieGuest(t, "PCIe topology guest", "pcieguest", 15*time.Minute)
	if !ok {
		return
	}
	out, console := g.run(t, "modprobe aer_inject", fmt.Sprintf("-inject 0000:40:00.0 -errors %d -rx eth3 -tx eth2 -frames %d", aerErrors, pcieFrames),
		vm.Config{NUMA: true, Devices: pcieTopology}, func(out string) string { return "the pcie series the guest saw:\n" + pcieSeries(out) })
	read := func(name string) exportertest.Families {
		b, err := os.ReadFile(filepath.Join(out, name+".prom"))
		if err != nil {
			t.Fatalf("%s: %v\nguest console:\n%s", name, err, console)
		}
		return exportertest.Parse(t, string(b))
	}

	initial := read("initial")
	checkPCIeLinks(t, initial)

	aer := read("aer")
	l := []string{"device", "eth3", "hop", "1", "pci_address", "0000:40:00.0", "class", "correctable", "error", "BadTLP"}
	if got := aer.Value(t, "xdp_pcie_aer_errors_total", l...) - initial.Value(t, "xdp_pcie_aer_errors_total", l...); got != aerErrors {
		t.Errorf("the root port's BadTLP count rose by %v after %d injected errors:\n%s", got, aerErrors, fmt.Sprint(aer.Series("xdp_pcie_aer_errors_total")))
	}

	t.Logf("eth3 at %s on node 1, behind %s; %d Bad TLP injected into the root port, counted %v",
		"0000:41:00.0", "0000:40:00.0", aerErrors, aer.Value(t, "xdp_pcie_aer_errors_total", l...)-initial.Value(t, "xdp_pcie_aer_errors_total", l...))
	for _, cpu := range []string{"0", "1"} {
		checkIRQMove(t, cpu, read("cpu"+cpu+"-before"), read("cpu"+cpu+"-after"))
	}
}

// checkPCIeLinks checks the guest's first scrape: each NIC's address and
// node, its link and its root port's, and which CPUs are remote from it.
func checkPCIeLinks(t *testing.T, initial exportertest.Families) {
	t.Helper()
	for _, d := range []struct{ dev, addr, node string }{{"eth3", "0000:41:00.0", "1"}, {"eth2", "0000:01:00.0", "-1"}} {
		if got := initial.Value(t, "xdp_pcie_device_info", "device", d.dev, "pci_address", d.addr, "numa_node", d.node); got != 1 {
			t.Errorf("%s: no device_info at %s on node %s:\n%s", d.dev, d.addr, d.node, fmt.Sprint(initial.Series("xdp_pcie_device_info")))
		}
	}
	for _, h := range []struct {
		dev, hop, addr         string
		speed, maxSpeed        float64
		width, maxWidth        float64
		bandwidthBytesPerSecnd float64
	}{
		{"eth3", "0", "0000:41:00.0", 2.5e9, 2.5e9, 1, 1, 2.5e9 * 0.8 / 8},
		{"eth3", "1", "0000:40:00.0", 2.5e9, 16e9, 1, 32, 2.5e9 * 0.8 / 8},
		{"eth2", "0", "0000:01:00.0", 2.5e9, 2.5e9, 1, 1, 2.5e9 * 0.8 / 8},
		{"eth2", "1", "0000:00:10.0", 2.5e9, 2.5e9, 1, 1, 2.5e9 * 0.8 / 8},
	} {
		l := []string{"device", h.dev, "hop", h.hop, "pci_address", h.addr}
		for fam, want := range map[string]float64{
			"xdp_pcie_link_speed_transfers_per_second":     h.speed,
			"xdp_pcie_link_max_speed_transfers_per_second": h.maxSpeed,
			"xdp_pcie_link_width_lanes":                    h.width,
			"xdp_pcie_link_max_width_lanes":                h.maxWidth,
			"xdp_pcie_link_bandwidth_bytes_per_second":     h.bandwidthBytesPerSecnd,
		} {
			if got := initial.Value(t, fam, l...); got != want {
				t.Errorf("%s{%s} = %v, want %v:\n%s", fam, strings.Join(l, ","), got, want, fmt.Sprint(initial.Series(fam)))
			}
		}
	}
	for _, dev := range []string{"eth2", "eth3"} {
		if got := initial.Value(t, "xdp_pcie_link_degraded", "device", dev, "hop", "0"); got != 0 {
			t.Errorf("%s's x1 link to a port that can do x1 or more is degraded: %v", dev, got)
		}
	}
	for cpu, want := range map[string]float64{"0": 1, "1": 0} {
		if got := remoteCPU(t, initial, "eth3", cpu); got != want {
			t.Errorf("CPU %s remote from eth3 (node 1): %v, want %v", cpu, got, want)
		}
	}
	initial.Value(t, "xdp_pcie_device_info", "device", "eth2", "numa_node", "-1")
}

// remoteCPU is 1 if the pcie collector puts cpu on another NUMA node than
// dev, else 0.
func remoteCPU(t *testing.T, f exportertest.Families, dev, cpu string) float64 {
	t.Helper()
	f.Value(t, "xdp_pcie_device_info", "device", dev)
	f.Value(t, "xdp_pcie_cpu_info", "cpu", cpu)
	nic := exportertest.Label(f.Series("xdp_pcie_device_info", "device", dev)[0], "numa_node")
	if _, local := f.Sum("xdp_pcie_cpu_info", "cpu", cpu, "numa_node", nic); local == 1 {
		return 0
	}
	return 1
}

// checkIRQMove checks the scrapes before and after frames sent with
// eth3's RX IRQ on cpu: the rxq collector counted them there, and the
// pcie collector's remote ratio and share follow the IRQ (CPU 0 is remote
// from eth3's node, CPU 1 local).
func checkIRQMove(t *testing.T, cpu string, before, after exportertest.Families) {
	t.Helper()
	other, remote := "1", 1.0
	if cpu == "1" {
		other, remote = "0", 0
	}
	delta := func(cpu string) float64 {
		a, _ := after.Sum("xdp_rxq_packets_total", "device", "eth3", "cpu", cpu)
		b, _ := before.Sum("xdp_rxq_packets_total", "device", "eth3", "cpu", cpu)
		return a - b
	}
	on, off := delta(cpu), delta(other)
	if on < pcieFrames || off != 0 {
		t.Errorf("IRQ on CPU %s: eth3's XDP packets %v there and %v on CPU %s, want at least %d and 0", cpu, on, off, other, pcieFrames)
	}
	if got := after.Value(t, "xdp_pcie_rx_queue_numa_remote_ratio", "device", "eth3", "queue", "0"); got != remote {
		t.Errorf("IRQ on CPU %s: queue 0's remote ratio %v, want %v:\n%s", cpu, got, remote, fmt.Sprint(after.Series("xdp_pcie_rx_queue_numa_remote_ratio")))
	}
	share := (on*remoteCPU(t, after, "eth3", cpu) + off*remoteCPU(t, after, "eth3", other)) / (on + off)
	if share != remote {
		t.Errorf("IRQ on CPU %s: remote share of eth3's XDP packets %v, want %v", cpu, share, remote)
	}
	t.Logf("eth3's RX IRQ on CPU %s: %v XDP packets there, %v on CPU %s; remote share %v", cpu, on, off, other, share)
}

// pcieSeries collects the pcie collector's lines of every scrape the
// guest wrote, for a failure message.
func pcieSeries(dir string) string {
	files, _ := filepath.Glob(filepath.Join(dir, "*.prom"))
	var b strings.Builder
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "== %s\n", filepath.Base(f))
		for _, line := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(line, "xdp_pcie_") || strings.HasPrefix(line, "xdp_scrape_collector_success") {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

// ownGuest is the guest of a host test that boots one of its own:
// Debian's 6.12 and, built static, the exporter and the test's guest half.
type ownGuest struct {
	ctx         context.Context
	kernel      vm.Kernel
	bin, binary string
}

// trixieGuest builds an ownGuest whose half is
// kernelmatrix/internal/<guest>, with a context of timeout. ok is false
// where this machine cannot boot guests (a failure in CI).
func trixieGuest(t *testing.T, what, guest string, timeout time.Duration) (g ownGuest, ok bool) {
	t.Helper()
	testenv.Privileged(t)
	if err := vm.Available(); err != nil {
		testenv.Unavailable(t, "%s: %v", what, err)
		return g, false
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	k, err := vm.Fetch(ctx, "trixie", "amd64")
	if err != nil {
		t.Fatal(err)
	}
	bin := buildStatic(t, "amd64", func(dir string) [][]string {
		return [][]string{
			{"go", "build", "-o", filepath.Join(dir, "xdp_exporter"), "./cmd/xdp_exporter"},
			{"go", "build", "-o", filepath.Join(dir, guest), "./kernelmatrix/internal/" + guest},
		}
	})
	return ownGuest{ctx, k, bin, guest}, true
}

// run boots the guest with cfg's devices, runs setup then the guest half
// (`GUEST EXPORTER OUTDIR args`, frames through AF_PACKET: under the
// emulator, live frames outrun NAPI), and returns the directory the half
// wrote to and what the guest printed. A guest that fails ends t with the
// console and what more says of out.
func (g ownGuest) run(t *testing.T, setup, args string, cfg vm.Config, more func(out string) string) (out, console string) {
	t.Helper()
	out = t.TempDir()
	var b strings.Builder
	cfg.Kernel, cfg.Console, cfg.Out = g.kernel, &b, out
	cfg.Script = fmt.Sprintf("export %s=packet\n%s\n%s/%s %s/xdp_exporter \"$XDPVM_OUT\" %s\n",
		trafficgen.MethodEnv, setup, g.bin, g.binary, g.bin, args)
	err := vm.Run(g.ctx, cfg)
	logHarness(t, b.String())
	if err != nil {
		t.Fatalf("%v\nguest console:\n%s\n%s", err, b.String(), more(out))
	}
	return out, b.String()
}
