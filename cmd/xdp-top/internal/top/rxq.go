package top

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// rxq is xdp_rxq_info's layout: XDP-RX pps per CPU and total, then
// RXQ:CPU pairs, with issue pps beside them; in observe mode, then the
// verdicts of each program inside libxdp's dispatcher.
func (v viewCtx) rxq() string {
	if !v.cur.Has("xdp_rxq_packets_total") && !v.cur.Has("xdp_rxq_component_packets_total") {
		return v.rxqFallback()
	}
	pkts := v.rates("xdp_rxq_packets_total")
	comps := v.rates("xdp_rxq_component_packets_total")
	t := newTable()
	t.row(v.rxqSource(v.cur.Has("xdp_rxq_packets_total")))
	issues := sum(v.rates("xdp_rxq_issues_total"))
	// The pcie collector gives the NUMA node of each CPU and NIC: a CPU
	// of another node than the NIC's processes packets DDIO put in the
	// other socket's cache.
	remote := map[[2]string]bool{}
	for _, nic := range v.cur.Values("xdp_pcie_device_info") {
		if node := nic.Get("numa_node"); node != "-1" {
			for _, cpu := range v.cur.Values("xdp_pcie_cpu_info") {
				remote[[2]string{nic.Get("device"), cpu.Get("cpu")}] = cpu.Get("numa_node") != node
			}
		}
	}
	for _, dev := range byLabels(append(slices.Clone(pkts), comps...), "device") {
		d := dev.Labels["device"]
		t.row("Device", d)
		if mine := withLabel(pkts, "device", d); len(mine) > 0 {
			rxqDevice(t, d, mine, remote, issues)
		}
		v.rxqComponents(t, d, withLabel(comps, "device", d))
	}
	return t.String()
}

// rxqSource names where the counts come from (the device's final
// verdicts, or only those of the dispatcher's components), and in observe
// mode the programs observed and those the kernel would not let it
// observe.
func (v viewCtx) rxqSource(final bool) string {
	source := "source: rxq collector (xdp_rxq_packets_total)"
	if !final {
		source = "source: rxq collector in observe mode (xdp_rxq_component_packets_total)"
	}
	var progs, refused []string
	for _, s := range v.cur.Values("xdp_rxq_observed_info") {
		progs = append(progs, s.Labels["device"]+" prog "+s.Labels["prog_id"])
	}
	for _, s := range v.cur.Values("xdp_rxq_unobservable_info") {
		refused = append(refused, s.Labels["device"]+" prog "+s.Labels["prog_id"]+" ("+s.Labels["reason"]+")")
	}
	if len(progs) > 0 {
		source += ", observing " + strings.Join(progs, ", ")
	}
	if len(refused) > 0 {
		source += "; not observable: " + strings.Join(refused, ", ")
	}
	return source
}

// withLabel is the series of ss whose label name is value.
func withLabel(ss []Series, name, value string) []Series {
	var mine []Series
	for _, s := range ss {
		if s.Labels[name] == value {
			mine = append(mine, s)
		}
	}
	return mine
}

// rxqDevice draws device d's packets per CPU and per RX queue and CPU.
func rxqDevice(t *table, d string, mine []Series, remote map[[2]string]bool, issues float64) {
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
	actions := verdicts(mine)
	t.row(append([]string{"RXQ stats", "RXQ:CPU", "pps"}, actions...)...)
	queueRows(t, "rx_queue_index", mine, actions)
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

// verdicts lists the actions of ss, sorted.
func verdicts(ss []Series) []string {
	var actions []string
	for _, a := range byLabels(ss, "action") {
		actions = append(actions, a.Labels["action"])
	}
	return actions
}

// queueRows draws a row per RXQ:CPU pair of ss, its pps and then the pps
// of each of actions, the first cell being first.
func queueRows(t *table, first string, ss []Series, actions []string) {
	cell := map[[3]string]float64{}
	for _, c := range byLabels(ss, "queue", "cpu", "action") {
		cell[[3]string{c.Labels["queue"], c.Labels["cpu"], c.Labels["action"]}] = c.Value
	}
	for _, q := range byLabels(ss, "queue", "cpu") {
		row := []string{first, q.Labels["queue"] + ":" + q.Labels["cpu"], pps(q.Value)}
		for _, a := range actions {
			row = append(row, pps(cell[[3]string{q.Labels["queue"], q.Labels["cpu"], a}]))
		}
		t.row(row...)
	}
}

// rxqComponents draws the verdicts of each program inside libxdp's
// dispatcher on device d, in the order the dispatcher calls them (the bpf
// collector's slots; by program id where it is off), each headed by the
// verdicts that hand the packet on to the next slot: any other verdict
// is the device's.
func (v viewCtx) rxqComponents(t *table, d string, comps []Series) {
	if len(comps) == 0 {
		return
	}
	slot := map[string]Series{}
	for _, s := range v.cur.Values("xdp_bpf_dispatcher_component_info") {
		if s.Labels["device"] == d {
			slot[s.Labels["prog_id"]] = s
		}
	}
	progs := byLabels(comps, "prog_id", "name")
	order := func(p Series) int {
		if s, ok := slot[p.Labels["prog_id"]]; ok {
			return atoi(s.Labels["slot"])
		}
		return math.MaxInt
	}
	slices.SortStableFunc(progs, func(a, b Series) int { return cmp.Compare(order(a), order(b)) })
	actions := verdicts(comps)
	t.row("")
	t.row(append([]string{"Dispatcher", "RXQ:CPU", "pps"}, actions...)...)
	for _, p := range progs {
		id := p.Labels["prog_id"]
		head := "component prog " + id + " " + p.Labels["name"]
		if s, ok := slot[id]; ok {
			head = fmt.Sprintf("slot %s: prog %s %s, %s goes on to the next slot", s.Labels["slot"], id, p.Labels["name"], orNone(s.Labels["chain_call_actions"]))
		}
		t.row(head)
		queueRows(t, "component", withLabel(comps, "prog_id", id), actions)
	}
}

func orNone(s string) string {
	if s == "" {
		return "no verdict"
	}
	return s
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

// rxqFallback draws per-queue XDP packets from the driver's counters when
// the rxq collector is off.
func (v viewCtx) rxqFallback() string {
	for _, src := range []struct{ family, what string }{
		{"xdp_nic_rx_xdp_processed_packets_total", "the driver's per-queue XDP counters (ethtool collector)"},
		{"xdp_netdev_queue_rx_packets_total", "the netdev qstats per queue (netdev collector)"},
		{"xdp_nic_rx_queue_packets_total", "the driver's per-queue RX counters (ethtool collector)"},
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
