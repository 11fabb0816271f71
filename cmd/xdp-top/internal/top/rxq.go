package top

import (
	"fmt"
	"strings"
)

// rxq is xdp_rxq_info's layout: XDP-RX pps per CPU and total, then
// RXQ:CPU pairs, with issue pps beside them.
func (v viewCtx) rxq() string {
	pkts := v.rates("xdp_rxq_packets_total")
	if !v.cur.Has("xdp_rxq_packets_total") {
		return v.rxqFallback()
	}
	t := newTable()
	source := "source: rxq collector (xdp_rxq_packets_total)"
	if observed := v.cur.Values("xdp_rxq_observed_info"); len(observed) > 0 {
		var progs []string
		for _, s := range observed {
			progs = append(progs, s.Labels["device"]+" prog "+s.Labels["prog_id"])
		}
		source += ", observing " + strings.Join(progs, ", ")
	}
	t.row(source)
	issues := sum(v.rates("xdp_rxq_issues_total"))
	// The pcie collector says which CPUs are on another NUMA node than
	// the NIC: DDIO put the packets in the other socket's cache.
	remote := map[[2]string]bool{}
	for _, s := range v.cur.Values("xdp_pcie_cpu_numa_remote") {
		remote[[2]string{s.Labels["device"], s.Labels["cpu"]}] = s.Value == 1
	}
	for _, dev := range byLabels(pkts, "device") {
		d := dev.Labels["device"]
		var mine []Series
		for _, s := range pkts {
			if s.Labels["device"] == d {
				mine = append(mine, s)
			}
		}
		t.row("Device", d)
		t.row("XDP stats", "CPU", "pps", "issue-pps")
		for _, c := range byLabels(mine, "cpu") {
			numa := ""
			if remote[[2]string{d, c.Labels["cpu"]}] {
				numa = "remote NUMA node"
			}
			t.row("XDP-RX CPU", c.Labels["cpu"], pps(c.Value), "", numa)
		}
		t.row("XDP-RX CPU", "total", pps(sum(mine)), pps(issues))
		t.row("")
		// A column per verdict the device returned: the rxq program's one,
		// or every verdict of the programs observe mode watches.
		var actions []string
		for _, a := range byLabels(mine, "action") {
			actions = append(actions, a.Labels["action"])
		}
		cell := map[[3]string]float64{}
		for _, c := range byLabels(mine, "queue", "cpu", "action") {
			cell[[3]string{c.Labels["queue"], c.Labels["cpu"], c.Labels["action"]}] = c.Value
		}
		t.row(append([]string{"RXQ stats", "RXQ:CPU", "pps"}, actions...)...)
		for _, q := range byLabels(mine, "queue", "cpu") {
			row := []string{"rx_queue_index", q.Labels["queue"] + ":" + q.Labels["cpu"], pps(q.Value)}
			for _, a := range actions {
				row = append(row, pps(cell[[3]string{q.Labels["queue"], q.Labels["cpu"], a}]))
			}
			t.row(row...)
		}
		for _, q := range byLabels(mine, "queue") {
			t.row("rx_queue_index", q.Labels["queue"]+":sum", pps(q.Value), "")
		}
		cpusOfQueue := map[string]int{}
		for _, q := range byLabels(mine, "queue", "cpu") {
			if q.Value > 0 {
				cpusOfQueue[q.Labels["cpu"]]++
			}
		}
		for _, c := range byLabels(mine, "cpu") {
			if n := cpusOfQueue[c.Labels["cpu"]]; n > 1 {
				t.row("!", fmt.Sprintf("CPU %s serves %d busy queues", c.Labels["cpu"], n))
			}
		}
	}
	return t.String()
}

// rxqFallback draws per-queue XDP packets from the driver's counters when
// the rxq collector is off.
func (v viewCtx) rxqFallback() string {
	for _, src := range []struct{ family, what string }{
		{"xdp_ethtool_rx_xdp_processed_packets_total", "the driver's per-queue XDP counters (ethtool collector)"},
		{"xdp_netdev_queue_rx_packets_total", "the netdev qstats per queue (netdev collector)"},
		{"xdp_ethtool_rx_queue_packets_total", "the driver's per-queue RX counters (ethtool collector)"},
	} {
		if !v.cur.Has(src.family) {
			continue
		}
		rs := v.rates(src.family)
		t := newTable()
		t.row("source: " + src.what + "; --collector.rxq (or --collector.rxq.observe beside your own program) adds the per-CPU and verdict split")
		t.row("Device", "RXQ", "pps")
		for _, q := range byLabels(rs, "device", "queue") {
			t.row(q.Labels["device"], q.Labels["queue"], pps(q.Value))
		}
		for _, d := range byLabels(rs, "device") {
			t.row(d.Labels["device"], "total", pps(d.Value))
		}
		return t.String()
	}
	return needs("rxq", "xdp_rxq_packets_total")
}
