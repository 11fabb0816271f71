package collector

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolname"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// The benchmark notes' signature (the XDP paper's benchmark notes, XDP_DROP on six
// RX queues): the port receives 88,049,446 packets/s and drops 13,760,980
// of them for lack of host resources while the RX CPUs are 39% idle. The
// healthy run drops 93,624/s, 0.1%.
const (
	seedPortRx    = 88_049_446
	seedDrops     = 13_760_980
	seedHealthy   = 93_624
	driverTests   = "../dashboards/rules/tests/nic_drivers.yml"
	seedPortHuman = "88.05M"
	seedDropHuman = "13.76M"
)

// seedCPUs is the benchmark notes' mpstat of the six RX CPUs (irq, softirq, idle
// as seconds per second): 39.01% idle on average.
var seedCPUs = [][3]float64{{0.0152, 0.5960, 0.3889}, {0.0150, 0.6150, 0.3700}, {0.0102, 0.5990, 0.3909},
	{0.0151, 0.5829, 0.4020}, {0.0102, 0.5990, 0.3909}, {0.0102, 0.5918, 0.3980}}

// driverCase is a device whose counters carry the benchmark notes' case: the port's
// packets grow by seedPortRx on its first port stat and the drops on its
// first drop stat, at the port where it has one, else on a ring; a device
// whose drops come from a standard counter gets them there.
type driverCase struct {
	name string
	dev  *fixtureDev
	// std puts drops per second into the device's standard counters.
	std func(s *fixtureSource, ifindex int, drops uint64)
}

func driverCases(t *testing.T) []driverCase {
	var cases []driverCase
	for _, f := range []string{"mlx5", "i40e", "ice", "ixgbe", "bnxt", "igb", "gve", "e1000e", "vmxnet3"} {
		cases = append(cases, driverCase{name: f, dev: loadFixture(t, filepath.Join("testdata", "ethtool", f+".txt"))})
	}
	for _, d := range []string{"mlx4_en", "igc", "sfc", "nfp", "idpf"} {
		cases = append(cases, driverCase{name: d, dev: sourceDev(d)})
	}
	cases[len(cases)-1].std = linkDrops("rx_dropped") // idpf's vport discards
	virtio := loadFixture(t, filepath.Join("testdata", "ethtool", "virtio_net.txt"))
	cases = append(cases, driverCase{name: "virtio_net", dev: virtio, std: func(s *fixtureSource, ifindex int, drops uint64) {
		q := netdev.Qstats{Ifindex: uint32(ifindex)}
		q.Values[qstatDropOverruns], q.Present[qstatDropOverruns] = drops, true
		s.std.qstats = []netdev.Qstats{q}
	}})
	unknown := loadFixture(t, filepath.Join("testdata", "ethtool", "veth.txt"))
	unknown.info.Driver = "8139cp"
	return append(cases, driverCase{name: "8139cp", dev: unknown, std: linkDrops("rx_missed_errors")})
}

// linkDrops puts the drops into one rtnl_link_stats64 field.
func linkDrops(field string) func(*fixtureSource, int, uint64) {
	return func(s *fixtureSource, ifindex int, drops uint64) {
		l := rtnl.LinkStats{Index: uint32(ifindex), N: len(rtnl.Stats64Names)}
		l.Values[slices.Index(rtnl.Stats64Names[:], field)] = drops
		s.std.link = []rtnl.LinkStats{l}
	}
}

// seedStats are the indexes of the device's first port-rx stat (-1: none)
// and of the stat its drops go to: its first drop at the port, else on a
// ring (-1: a standard counter).
func seedStats(d *fixtureDev) (port, drop int) {
	port, atPort, onRing := -1, -1, -1
	idx := driverIndexes[d.info.Driver]
	stats, _ := ethtoolname.ParseAll(d.names)
	first := func(i *int, at int) {
		if *i < 0 {
			*i = at
		}
	}
	for i, st := range stats {
		switch ds, _ := idx.lookup(st); ds.sig {
		case sigPortRxPackets:
			first(&port, i)
		case sigDropPort:
			first(&atPort, i)
		case sigDropRing:
			first(&onRing, i)
		}
	}
	if atPort >= 0 {
		return port, atPort
	}
	return port, onRing
}

// scrapeCase is the device's NIC series after one second of drops per
// second at the benchmark notes' port rate: the series at 0 and their growth.
func scrapeCase(t *testing.T, c driverCase, drops uint64) (start, growth map[string]float64) {
	dev := *c.dev
	dev.vals = slices.Clone(c.dev.vals)
	src := newFixtureSource(map[string]*fixtureDev{c.name: &dev})
	port, drop := seedStats(&dev)
	scrape := func(elapsed uint64) map[string]float64 {
		if port >= 0 {
			dev.vals[port] = c.dev.vals[port] + elapsed*seedPortRx
		}
		if drop >= 0 {
			dev.vals[drop] = c.dev.vals[drop] + elapsed*drops
		} else {
			c.std(src, src.index[c.name], elapsed*drops)
		}
		return rawNICSeries(gather(t, fixtureCollector(t, src, "", "", nil)), c.name, append(nicFamilies, "xdp_nic_signal_source_info")...)
	}
	start, after := scrape(0), scrape(1)
	growth = map[string]float64{}
	for k, v := range after {
		growth[k] = v - start[k]
	}
	return start, growth
}

// TestNICDriverAlertCases writes, for every driver family, the benchmark notes' case
// and a healthy load in that driver's counters as the collector reports
// them, into the promtool tests that TestRulesUnit runs: XDPNICDropsWhileRXCPUsIdle
// fires on the first, names the driver's counters, and stays quiet on the
// second (the healthy drops, or none where the device has no port counter
// for a ratio). The file must be what the fixtures give; make generate
// RECORD=1 rewrites it.
func TestNICDriverAlertCases(t *testing.T) {
	var b strings.Builder
	b.WriteString("# Generated by TestNICDriverAlertCases (collector/nic_alert_test.go) from the driver\n" +
		"# fixtures and source names: make generate RECORD=1. The PCIe-bound case of nic.yml (the XDP\n" +
		"# paper's benchmark notes) in each driver's counters, as the ethtool collector reports them.\n" +
		"rule_files:\n  - ../recording.yml\n  - ../alerts.yml\nevaluation_interval: 15s\n\ntests:\n")
	for _, c := range driverCases(t) {
		start, growth := scrapeCase(t, c, seedDrops)
		_, hasPort := growth["xdp_nic_port_packets_total{direction=rx}"]
		quiet := uint64(0)
		if hasPort {
			quiet = seedHealthy
		}
		writeCase(&b, c.name+": the PCIe-bound drops of the benchmark notes, RX CPUs idle", c.name, start, growth, seedAlert(c.name, growth, hasPort))
		qStart, qGrowth := scrapeCase(t, c, quiet)
		writeCase(&b, fmt.Sprintf("%s: %d drops/s, quiet", c.name, quiet), c.name, qStart, qGrowth, "")
	}
	if testenv.Recording() {
		testenv.Check(t, os.WriteFile(driverTests, []byte(b.String()), 0o644), "recording")
	}
	got, err := os.ReadFile(driverTests)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != b.String() {
		t.Errorf("%s differs from what the driver fixtures give; make generate RECORD=1 rewrites it", driverTests)
	}
}

// seedAlert is the firing alert's YAML: the labels, and the description
// naming the device's source and drop counters.
func seedAlert(device string, growth map[string]float64, hasPort bool) string {
	type counter struct{ stat, text string }
	var counters []counter
	for k := range growth {
		if labels := parseLabels(k); strings.HasPrefix(k, "xdp_nic_signal_source_info{") && labels["family"] == "xdp_nic_rx_host_drops_total" {
			where := ""
			if w := labels["where"]; w != "" {
				where = w + ", "
			}
			counters = append(counters, counter{labels["stat"], labels["stat"] + " (" + where + labels["source"] + ")"})
		}
	}
	slices.SortFunc(counters, func(a, b counter) int { return strings.Compare(a.stat, b.stat) })
	var stats []string
	for _, c := range counters {
		stats = append(stats, c.text)
	}
	portRx := "unknown"
	if hasPort {
		portRx = seedPortHuman
	}
	return fmt.Sprintf("          - exp_labels: {severity: warning, job: xdp, instance: \"dut:9435\", device: %s}\n"+
		"            exp_annotations:\n"+
		"              summary: '%s on dut:9435 drops packets for lack of host resources while its RX CPUs are idle'\n"+
		"              action: \"Cut PCIe transactions per packet (ethtool --set-priv-flags DEV rx_cqe_compress on), check the slot's width and speed and the NUMA node; more CPUs do not help.\"\n"+
		"              description: 'The NIC drops %s packets/s for lack of host resources (%s) out of %s packets/s received at the port, "+
		"while the RX CPUs are 39.01%% idle on average: the host, not the CPUs, cannot move packets off the NIC fast enough.'\n"+
		"              runbook_url: 'https://github.com/xdp-exporter/xdp_exporter/blob/main/docs/runbook.md#xdpnicdropswhilerxcpusidle'\n",
		device, device, seedDropHuman, strings.Join(stats, ", "), portRx)
}

// writeCase writes one promtool test: the device's series growing at
// their rate for 15 minutes, the benchmark notes' RX CPUs, and the alert expected
// at 10 minutes (none when alert is empty).
func writeCase(b *strings.Builder, name, device string, start, growth map[string]float64, alert string) {
	fmt.Fprintf(b, "  - name: '%s'\n    interval: 1s\n    input_series:\n", name)
	for _, k := range slices.Sorted(maps.Keys(start)) {
		fam, labels, _ := strings.Cut(strings.TrimSuffix(k, "}"), "{")
		fmt.Fprintf(b, "      - series: '%s{%s}'\n        values: '%.0f+%.0fx900'\n",
			fam, quoteLabels(strings.Join([]string{"instance=dut:9435", "job=xdp", "device=" + device, labels}, unitSep)), start[k], growth[k])
	}
	for cpu, modes := range seedCPUs {
		for i, mode := range []string{"irq", "softirq", "idle"} {
			fmt.Fprintf(b, "      - series: 'xdp_cpu_seconds_total{instance=\"dut:9435\",job=\"xdp\",cpu=\"%d\",mode=\"%s\"}'\n        values: '0+%gx900'\n",
				cpu, mode, modes[i])
		}
	}
	b.WriteString("    alert_rule_test:\n      - eval_time: 10m\n        alertname: XDPNICDropsWhileRXCPUsIdle\n")
	if alert == "" {
		b.WriteString("        exp_alerts: []\n")
		return
	}
	b.WriteString("        exp_alerts:\n" + alert)
}

// parseLabels reads the labels of a rawNICSeries key.
func parseLabels(key string) map[string]string {
	_, labels, _ := strings.Cut(strings.TrimSuffix(key, "}"), "{")
	out := map[string]string{}
	for _, kv := range strings.Split(labels, unitSep) {
		if k, v, ok := strings.Cut(kv, "="); ok {
			out[k] = v
		}
	}
	return out
}

// quoteLabels turns rawNICSeries' labels into PromQL's name="value",...
func quoteLabels(labels string) string {
	var out []string
	for _, kv := range strings.Split(labels, unitSep) {
		if kv == "" {
			continue
		}
		k, v, _ := strings.Cut(kv, "=")
		out = append(out, k+`="`+strings.ReplaceAll(v, `"`, `\"`)+`"`)
	}
	return strings.Join(out, ",")
}
