package kernelmatrix

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/emunic"
)

// ethtoolView is one of nicguest's ethtool outputs for a NIC: its text,
// or refused where the driver answered the call with an error.
type ethtoolView struct {
	text    string
	refused bool
}

func readView(t *testing.T, out, driver, suffix string) ethtoolView {
	t.Helper()
	base := filepath.Join(out, driver+suffix)
	if b, err := os.ReadFile(base); err == nil {
		return ethtoolView{text: string(b)}
	}
	b, err := os.ReadFile(base + ".refused")
	if err != nil {
		t.Fatalf("%s: neither the output nor a refusal: %v", base, err)
	}
	return ethtoolView{text: string(b), refused: true}
}

// value is the text after "key:" on the view's first line that has it.
func (v ethtoolView) value(key string) (string, bool) {
	for _, line := range strings.Split(v.text, "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && k == key {
			return strings.TrimSpace(val), true
		}
	}
	return "", false
}

// checkConfig compares the NIC's configuration families with what ethtool
// showed in the guest: a view ethtool printed has its series with its
// values, a call the driver refused has none.
func (g guestNIC) checkConfig(out string) {
	t := g.t
	series := func(fam string, labels ...string) []string {
		var s []string
		for _, m := range g.mfs.Series(fam, append([]string{"device", g.Dev}, labels...)...) {
			s = append(s, fmt.Sprint(m))
		}
		return s
	}
	expect := func(fam string, want float64, labels ...string) {
		t.Helper()
		if got := g.signal(fam, labels...); got != want {
			t.Errorf("%s: %s%v = %v, ethtool says %v", g.Driver, fam, labels, got, want)
		}
	}
	none := func(view, fam string) {
		t.Helper()
		if s := series(fam); len(s) != 0 {
			t.Errorf("%s: ethtool %s was refused, yet %s has %v", g.Driver, view, fam, s)
		}
	}

	settings := readView(t, out, g.Driver, ".ethtool")
	if speed, ok := settings.value("Speed"); ok && strings.HasSuffix(speed, "Mb/s") {
		mbps, err := strconv.ParseFloat(strings.TrimSuffix(speed, "Mb/s"), 64)
		if err != nil {
			t.Fatalf("%s: speed %q", g.Driver, speed)
		}
		expect("xdp_nic_link_speed_bytes_per_second", mbps*125_000)
		duplex, _ := settings.value("Duplex")
		autoneg, _ := settings.value("Auto-negotiation")
		expect("xdp_nic_link_info", 1, "duplex", strings.ToLower(duplex), "autoneg", autoneg)
	} else {
		none("(settings) without a speed", "xdp_nic_link_speed_bytes_per_second")
	}

	if c := readView(t, out, g.Driver, ".ethtool-c"); c.refused {
		none("-c", "xdp_nic_coalesce_delay_seconds")
	} else {
		for _, dir := range []string{"rx", "tx"} {
			usecs, frames := number(t, c, dir+"-usecs"), number(t, c, dir+"-frames")
			expect("xdp_nic_coalesce_delay_seconds", usecs/1e6, "direction", dir)
			expect("xdp_nic_coalesce_max_frames", frames, "direction", dir)
		}
	}

	if a := readView(t, out, g.Driver, ".ethtool-a"); a.refused {
		none("-a", "xdp_nic_pause_enabled")
		none("-a", "xdp_nic_pause_autoneg_enabled")
	} else {
		for key, dir := range map[string]string{"RX": "rx", "TX": "tx"} {
			v, _ := a.value(key)
			expect("xdp_nic_pause_enabled", map[string]float64{"on": 1}[v], "direction", dir)
		}
		v, _ := a.value("Autonegotiate")
		expect("xdp_nic_pause_autoneg_enabled", map[string]float64{"on": 1}[v])
	}

	if x := readView(t, out, g.Driver, ".ethtool-x"); x.refused || !strings.Contains(x.text, "indirection table") {
		none("-x", "xdp_nic_rss_indirection_entries")
	} else {
		entries := indirectionEntries(t, x.text)
		for q, n := range entries {
			expect("xdp_nic_rss_indirection_entries", float64(n), "queue", strconv.Itoa(q))
		}
		if s := series("xdp_nic_rss_indirection_entries"); len(s) != len(entries) {
			t.Errorf("%s: %d queues in ethtool -x's table, %d series: %v", g.Driver, len(entries), len(s), s)
		}
		t.Logf("%s: RSS indirection entries per queue %v, as ethtool -x shows them", g.Driver, entries)
	}

	for _, flow := range []string{"tcp4", "udp4", "tcp6", "udp6"} {
		v := readView(t, out, g.Driver, ".ethtool-n-"+flow)
		if s := series("xdp_nic_rss_hash_fields_info", "flow_type", flow); v.refused != (len(s) == 0) {
			t.Errorf("%s: ethtool -n rx-flow-hash %s refused %v, series %v:\n%s", g.Driver, flow, v.refused, s, v.text)
		}
	}
}

// number is a -c line's value, "n/a" 0.
func number(t *testing.T, v ethtoolView, key string) float64 {
	t.Helper()
	s, ok := v.value(key)
	if !ok || s == "n/a" {
		return 0
	}
	n, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("ethtool -c %s: %q", key, s)
	}
	return n
}

// indirectionEntries counts ethtool -x's table rows ("    0:      0     1 ...")
// per queue.
func indirectionEntries(t *testing.T, text string) map[int]int {
	t.Helper()
	out := map[int]int{}
	for _, line := range strings.Split(text, "\n") {
		row, queues, ok := strings.Cut(strings.TrimSpace(line), ":")
		if _, err := strconv.Atoi(row); !ok || err != nil {
			continue
		}
		for _, f := range strings.Fields(queues) {
			q, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("ethtool -x row %q", line)
			}
			out[q]++
		}
	}
	return out
}

// checkQueueInterrupts compares each RX queue vector's interrupts in the
// scrape with its /proc/interrupts row read just before and just after
// it: equal to both when nothing fired in between (the NICs are quiet by
// then), and never outside them.
func (g guestNIC) checkQueueInterrupts(out string, irqs []irqLine) {
	t := g.t
	before, after := interruptRows(t, filepath.Join(out, "interrupts-before.txt")), interruptRows(t, filepath.Join(out, "interrupts-after.txt"))
	queues := 0
	for q := range 8 {
		l, ok := irqOf(irqs, g.Dev, q)
		if !ok {
			continue
		}
		queues++
		got := g.signal("xdp_pcie_rx_queue_interrupts_total", "queue", strconv.Itoa(q), "irq", l.irq)
		if got < float64(before[l.irq]) || got > float64(after[l.irq]) {
			t.Errorf("%s queue %d (IRQ %s %s): %v interrupts in the scrape, /proc/interrupts %d before and %d after", g.Driver, q, l.irq, l.name, got, before[l.irq], after[l.irq])
		}
		if before[l.irq] == after[l.irq] && got != float64(before[l.irq]) {
			t.Errorf("%s queue %d: %v interrupts, /proc/interrupts %d at the same moment", g.Driver, q, got, before[l.irq])
		}
		t.Logf("%s queue %d: IRQ %s (%s) %v interrupts, /proc/interrupts %d before and %d after the scrape", g.Driver, q, l.irq, l.name, got, before[l.irq], after[l.irq])
	}
	if queues == 0 {
		t.Errorf("%s: no RX queue vector named after %s in /proc/interrupts", g.Driver, g.Dev)
	}
	if _, n := g.mfs.Sum("xdp_pcie_rx_queue_interrupts_total", "device", g.Dev); n != queues {
		t.Errorf("%s: %d queue interrupt series, %d RX queue vectors", g.Driver, n, queues)
	}
}

// interruptRows sums each numbered row of a /proc/interrupts copy over
// its CPU columns.
func interruptRows(t *testing.T, path string) map[string]uint64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	cpus := len(strings.Fields(lines[0]))
	out := map[string]uint64{}
	for _, line := range lines[1:] {
		f := strings.Fields(line)
		if len(f) <= cpus {
			continue
		}
		irq := strings.TrimSuffix(f[0], ":")
		if _, err := strconv.Atoi(irq); err != nil {
			continue
		}
		for _, v := range f[1 : cpus+1] {
			n, _ := strconv.ParseUint(v, 10, 64)
			out[irq] += n
		}
	}
	return out
}

// captureConfigFixture writes the NIC's configuration views as the
// collector's config fixture (collector/testdata/ethtool/config), the
// views the driver refused left out as the fixture source answers them:
// EOPNOTSUPP.
func captureConfigFixture(t *testing.T, out string, n emunic.NIC, kernel string) {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "# Captured real output: the configuration views of QEMU 7.2's emulated %s under Linux %s\n"+
		"# (Debian), by kernelmatrix's TestEmulatedNICs with XDP_EXPORTER_RECORD=capture; the driver refused", n.Device, kernel)
	var views []string
	refused := ""
	for _, v := range []struct{ suffix, command string }{
		{".ethtool", "DEV"}, {".ethtool-c", "-c"}, {".ethtool-a", "-I -a"}, {".ethtool-x", "-x"},
		{".ethtool-n-tcp4", "-n DEV rx-flow-hash tcp4"}, {".ethtool-n-udp4", "-n DEV rx-flow-hash udp4"},
		{".ethtool-n-tcp6", "-n DEV rx-flow-hash tcp6"}, {".ethtool-n-udp6", "-n DEV rx-flow-hash udp6"},
	} {
		view := readView(t, out, n.Driver, v.suffix)
		if view.refused {
			refused += ", ethtool " + v.command
			continue
		}
		views = append(views, strings.TrimSuffix(view.text, "\n")+"\n")
	}
	if refused == "" {
		refused = " nothing"
	}
	b.WriteString(strings.TrimPrefix(refused, ","))
	b.WriteString(".\n")
	for _, v := range views {
		b.WriteString(v)
	}
	path := filepath.Join(repoRoot(), "collector", "testdata", "ethtool", "config", n.Driver+".txt")
	testenv.Check(t, os.MkdirAll(filepath.Dir(path), 0o755), "recording")
	testenv.Check(t, os.WriteFile(path, []byte(b.String()), 0o644), "recording")
}
