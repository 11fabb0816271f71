package kernelmatrix

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/emunic"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/vm"
)

// TestEmulatedNICs boots Debian's 6.12 with QEMU's e1000e, vmxnet3 and
// rtl8139, each fed by a virtio-net NIC on a hub of their own, and runs
// kernelmatrix/internal/nicguest there: real drivers under a flood from
// the feeder into a minimum-size RX ring. The exporter's NIC signals must
// equal what each driver itself reports at the same moment:
//
//   - e1000e: port packets (GPRC, rx_packets) are the frames sent, and
//     the drop signal is rx_missed_errors as ethtool -S and ip -s link
//     give it. QEMU's e1000e holds a frame back while the ring is full
//     (e1000e_receive_iov answers 0 and the hub waits), so it never counts
//     MPC: the drops are 0 by QEMU's design, the ring's overflow is felt
//     as back-pressure on the feeder.
//   - vmxnet3: QEMU drops a frame the ring has no buffer for and counts it
//     (pktsRxOutOfBuf): the signal's ring drops are ethtool's `pkts rx OOB`
//     and must be some, the port packets its queues' ucast, mcast and bcast
//     packets, and together they are the frames sent. Its native XDP
//     (Linux 6.6) under the rxq collector counts each queue's packets as
//     the driver's queue blocks do, on the CPU its MSI-X vector's effective
//     affinity names.
//   - rtl8139 under 8139cp (QEMU emulates the C+ chip, which 8139too
//     leaves to 8139cp), a driver with no name table: the signal comes from
//     rtnl_link_stats64 rx_missed_errors (the chip's RxMissed, counted when
//     C+ mode finds no free descriptor), equal to ip -s link's, and with
//     rx_packets it adds up to the frames sent.
//
// With XDP_EXPORTER_RECORD=capture the e1000e and vmxnet3 dumps become the
// collector's fixtures.
func TestEmulatedNICs(t *testing.T) {
	guest, ok := trixieGuest(t, "emulated NICs guest", "nicguest", 20*time.Minute)
	if !ok {
		return
	}
	out, _ := guest.run(t, "modprobe -a e1000e vmxnet3 8139cp", "", vm.Config{Devices: emunic.QEMUArgs(emunic.NICs)},
		func(string) string { return "" })
	var nics []emunic.NIC
	b, err := os.ReadFile(filepath.Join(out, "nics.json"))
	if err == nil {
		err = json.Unmarshal(b, &nics)
	}
	if err != nil {
		t.Fatal(err)
	}
	prom, err := os.ReadFile(filepath.Join(out, "scrape.prom"))
	if err != nil {
		t.Fatal(err)
	}
	mfs := exportertest.Parse(t, string(prom))
	for _, n := range nics {
		g := guestNIC{t: t, NIC: n, mfs: mfs, stats: ethtoolStats(t, filepath.Join(out, n.Driver+".ethtool-S")), ip: ipStats(t, filepath.Join(out, n.Driver+".ip.json"))}
		irqs := readIRQs(t, filepath.Join(out, "irqs.txt"))
		switch n.Driver {
		case "e1000e":
			g.checkE1000e()
			g.checkQueueInterrupts(out, irqs)
		case "vmxnet3":
			g.checkVmxnet3(irqs)
			g.checkQueueInterrupts(out, irqs)
		case "8139cp":
			g.checkUnknown()
		}
		g.checkConfig(out)
		if testenv.Capturing() && n.Driver != "8139cp" {
			captureFixture(t, out, n, guest.kernel.Version)
			captureConfigFixture(t, out, n, guest.kernel.Version)
		}
	}
}

// guestNIC is one NIC's scrape and its driver's own counters.
type guestNIC struct {
	t *testing.T
	emunic.NIC
	mfs   exportertest.Families
	stats []stat
	ip    map[string]uint64
}

// signal is the one sample of family for the NIC with labels.
func (g guestNIC) signal(family string, labels ...string) float64 {
	return g.mfs.Value(g.t, family, append([]string{"device", g.Dev}, labels...)...)
}

// from checks that the NIC's xdp_nic_signal_source_info says its series
// of family with labels is read from source's counters stat.
func (g guestNIC) from(family, source, stat string, labels ...string) {
	g.signal("xdp_nic_signal_source_info", append([]string{"family", family, "source", source, "stat", stat}, labels...)...)
}

func (g guestNIC) checkE1000e() {
	t := g.t
	port := g.signal("xdp_nic_port_packets_total", "direction", "rx")
	drops := g.signal("xdp_nic_rx_host_drops_total", "where", "port")
	g.from("xdp_nic_rx_host_drops_total", "ethtool", "rx_missed_errors", "where", "port")
	if port != float64(g.Sent) || port != float64(g.sum("rx_packets")) {
		t.Errorf("e1000e: port packets %v, ethtool rx_packets %d, frames sent %d: want all equal", port, g.sum("rx_packets"), g.Sent)
	}
	if drops != float64(g.sum("rx_missed_errors")) || drops != float64(g.ip["missed_errors"]) {
		t.Errorf("e1000e: drop signal %v, ethtool rx_missed_errors %d, ip -s link missed %d: want all equal", drops, g.sum("rx_missed_errors"), g.ip["missed_errors"])
	}
	t.Logf("e1000e %s: %d frames sent, %v at the port, %v dropped for lack of host resources (QEMU holds frames back instead)", g.Dev, g.Sent, port, drops)
}

func (g guestNIC) checkVmxnet3(irqs []irqLine) {
	t := g.t
	port := g.signal("xdp_nic_port_packets_total", "direction", "rx")
	drops := g.signal("xdp_nic_rx_host_drops_total", "where", "ring")
	g.from("xdp_nic_rx_host_drops_total", "ethtool", "pkts rx OOB", "where", "ring")
	delivered := g.sum("ucast pkts rx") + g.sum("mcast pkts rx") + g.sum("bcast pkts rx")
	if port != float64(delivered) || drops != float64(g.sum("pkts rx OOB")) {
		t.Errorf("vmxnet3: port packets %v and ring drops %v, ethtool says %d and %d", port, drops, delivered, g.sum("pkts rx OOB"))
	}
	if drops == 0 || port+drops != float64(g.Sent) {
		t.Errorf("vmxnet3: %v delivered + %v dropped, want the %d frames sent with some dropped", port, drops, g.Sent)
	}
	if ok := g.mfs.Value(t, "xdp_scrape_collector_success", "collector", "rxq"); ok != 1 {
		t.Fatalf("vmxnet3: the rxq collector failed: its native XDP was refused")
	}
	for q, want := range g.perQueue() {
		ms := g.mfs.Series("xdp_rxq_packets_total", "device", g.Dev, "queue", strconv.Itoa(q))
		got, cpus := 0.0, map[string]bool{}
		for _, m := range ms {
			if v := exportertest.Value(m); v > 0 {
				got += v
				cpus[exportertest.Label(m, "cpu")] = true
			}
		}
		if got != float64(want) {
			t.Errorf("vmxnet3 queue %d: XDP counted %v, the driver's queue block %d", q, got, want)
		}
		if want == 0 {
			continue
		}
		irq, ok := irqOf(irqs, g.Dev, q)
		if !ok || len(cpus) != 1 || !cpus[irq.effective] {
			t.Errorf("vmxnet3 queue %d: XDP ran on CPUs %v; its MSI-X vector %+v (found %v)", q, cpus, irq, ok)
		}
		t.Logf("vmxnet3 queue %d: %v packets, all on CPU %s, the effective affinity of IRQ %s (%s)", q, got, irq.effective, irq.irq, irq.name)
	}
	t.Logf("vmxnet3 %s: %d frames sent, %v delivered, %v dropped on a full ring (pkts rx OOB)", g.Dev, g.Sent, port, drops)
}

func (g guestNIC) checkUnknown() {
	t := g.t
	drops := g.signal("xdp_nic_rx_host_drops_total")
	g.from("xdp_nic_rx_host_drops_total", "link_stats64", "rx_missed_errors")
	if drops != float64(g.ip["missed_errors"]) || float64(g.ip["packets"])+drops != float64(g.Sent) {
		t.Errorf("8139cp: drop signal %v, ip -s link missed %d and packets %d, frames sent %d", drops, g.ip["missed_errors"], g.ip["packets"], g.Sent)
	}
	if ms := g.mfs.Series("xdp_nic_port_packets_total", "device", g.Dev); len(ms) != 0 {
		t.Errorf("8139cp: port packets from a driver with no name table and no eth-mac: %v", ms)
	}
	t.Logf("8139cp %s (no name table): %d frames sent, %d received, %v missed (rtnl_link_stats64)", g.Dev, g.Sent, g.ip["packets"], drops)
}

// stat is one line of ethtool -S.
type stat struct {
	name  string
	value uint64
}

func ethtoolStats(t *testing.T, path string) []stat {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []stat
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		i := strings.LastIndex(sc.Text(), ":")
		if i < 0 {
			continue
		}
		v, err := strconv.ParseUint(strings.TrimSpace(sc.Text()[i+1:]), 10, 64)
		if err != nil {
			continue // the "NIC statistics:" header
		}
		out = append(out, stat{strings.TrimSpace(sc.Text()[:i]), v})
	}
	return out
}

// sum adds up every stat of the name (vmxnet3 repeats its per queue).
func (g guestNIC) sum(name string) uint64 {
	var s uint64
	for _, st := range g.stats {
		if st.name == name {
			s += st.value
		}
	}
	return s
}

// perQueue is the packets of each of vmxnet3's RX queue blocks ("Rx
// Queue#: N" and the names after it).
func (g guestNIC) perQueue() map[int]uint64 {
	out := map[int]uint64{}
	q := -1
	for _, st := range g.stats {
		switch {
		case st.name == "Rx Queue#":
			q = int(st.value)
			out[q] += 0
		case st.name == "Tx Queue#":
			q = -1
		case q >= 0 && (st.name == "ucast pkts rx" || st.name == "mcast pkts rx" || st.name == "bcast pkts rx"):
			out[q] += st.value
		}
	}
	return out
}

func ipStats(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var links []struct {
		Stats64 struct {
			Rx map[string]uint64 `json:"rx"`
		} `json:"stats64"`
	}
	if err := json.Unmarshal(b, &links); err != nil || len(links) != 1 {
		t.Fatalf("%s: %v", path, err)
	}
	return links[0].Stats64.Rx
}

// irqLine is one IRQ nicguest found for a NIC: number, name, effective
// affinity.
type irqLine struct{ irq, name, effective string }

func readIRQs(t *testing.T, path string) []irqLine {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []irqLine
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			out = append(out, irqLine{f[0], f[1], f[2]})
		}
	}
	return out
}

// irqOf is the MSI-X vector of dev's RX queue q: vmxnet3 names it
// DEV-rxtx-Q when RX and TX share vectors, else DEV-rx-Q.
func irqOf(irqs []irqLine, dev string, q int) (irqLine, bool) {
	for _, l := range irqs {
		if l.name == fmt.Sprintf("%s-rxtx-%d", dev, q) || l.name == fmt.Sprintf("%s-rx-%d", dev, q) {
			return l, true
		}
	}
	return irqLine{}, false
}

// captureFixture writes the NIC's ethtool -i and -S as a collector
// fixture, with where it was captured.
func captureFixture(t *testing.T, out string, n emunic.NIC, kernel string) {
	t.Helper()
	info, err := os.ReadFile(filepath.Join(out, n.Driver+".ethtool-i"))
	if err != nil {
		t.Fatal(err)
	}
	stats, err := os.ReadFile(filepath.Join(out, n.Driver+".ethtool-S"))
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# Captured real output: ethtool -i and ethtool -S of QEMU 7.2's emulated %s under Linux %s\n"+
		"# (Debian), %d frames from a virtio-net feeder into an RX ring of %d, by kernelmatrix's\n"+
		"# TestEmulatedNICs with XDP_EXPORTER_RECORD=capture.\n", n.Device, kernel, n.Sent, n.RxRing)
	for _, line := range strings.Split(string(info), "\n") {
		if k, _, ok := strings.Cut(line, ":"); ok && (k == "driver" || k == "version" || k == "firmware-version" || k == "bus-info") {
			b.WriteString(line + "\n")
		}
	}
	b.Write(stats)
	path := filepath.Join(repoRoot(), "collector", "testdata", "ethtool", n.Driver+".txt")
	testenv.Check(t, os.WriteFile(path, []byte(b.String()), 0o644), "recording")
}
