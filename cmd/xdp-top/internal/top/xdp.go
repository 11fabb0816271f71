package top

import (
	"strconv"
)

// xdp is xdp_monitor's table.
func (v viewCtx) xdp() string {
	if !v.cur.Has("xdp_monitor_tracepoint_attached") {
		return needs("monitor", "xdp_monitor_tracepoint_attached")
	}
	t := newTable()
	t.row("XDP-event", "where", "pps", "drop-pps", "bulk-avg")
	for _, s := range byLabels(v.rates("xdp_monitor_exceptions_total"), "device", "action") {
		t.row("Exception", s.Labels["device"]+" "+s.Labels["action"], pps(s.Value), "", "")
	}
	for _, s := range byLabels(v.rates("xdp_monitor_redirect_errors_total"), "device", "errno") {
		t.row("Redirect-err", s.Labels["device"]+" "+s.Labels["errno"], pps(s.Value), "", "")
	}
	for _, s := range byLabels(v.rates("xdp_monitor_redirects_total"), "device") {
		t.row("Redirect", s.Labels["device"], pps(s.Value), "", "")
	}
	v.bulkRows(t, "devmap-xmit", "xdp_devmap_xmit", []string{"from_device", "to_device"}, func(l map[string]string) string {
		return l["from_device"] + "->" + l["to_device"]
	})
	v.bulkRows(t, "cpumap-enqueue", "xdp_cpumap_enqueue", []string{"map_id", "to_cpu"}, func(l map[string]string) string {
		return "map " + l["map_id"] + " ->cpu " + l["to_cpu"]
	})
	for _, s := range byLabels(v.rates("xdp_monitor_cpumap_kthread_packets_total"), "map_id", "cpu") {
		drops := lookup(byLabels(v.rates("xdp_monitor_cpumap_kthread_drops_total"), "map_id", "cpu"), s.Labels)
		t.row("cpumap-kthread", "map "+s.Labels["map_id"]+" cpu "+s.Labels["cpu"], pps(s.Value), pps(drops), "")
	}
	v.bulkRows(t, "xdp-bulk-tx", "xdp_bulk_tx", []string{"device"}, func(l map[string]string) string { return l["device"] })
	if !v.cur.Has("xdp_monitor_devmap_xmit_packets_total") && !v.cur.Has("xdp_monitor_bulk_tx_packets_total") {
		t.row("(devmap, cpumap and XDP_TX bulks need --collector.monitor.xmit)")
	}
	return t.String()
}

// bulkRows adds pps, drops and bulk average (packets per bulk) of one
// transmit family set.
func (v viewCtx) bulkRows(t *table, event, prefix string, labels []string, where func(map[string]string) string) {
	drops := byLabels(v.rates(prefix+"_drops_total"), labels...)
	bulks := byLabels(v.rates(prefix+"_bulks_total"), labels...)
	for _, s := range byLabels(v.rates(prefix+"_packets_total"), labels...) {
		avg := ""
		if b := lookup(bulks, s.Labels); b > 0 {
			avg = strconv.FormatFloat(s.Value/b, 'f', 2, 64)
		}
		t.row(event, where(s.Labels), pps(s.Value), pps(lookup(drops, s.Labels)), avg)
	}
}

func lookup(ss []Series, labels map[string]string) float64 {
	for _, s := range ss {
		match := true
		for n, val := range s.Labels {
			match = match && labels[n] == val
		}
		if match {
			return s.Value
		}
	}
	return 0
}
