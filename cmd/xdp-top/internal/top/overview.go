package top

import (
	"fmt"
)

// overview is the headline of each view.
func (v viewCtx) overview() string {
	t := newTable()
	if v.cur.Has("xdp_rxq_packets_total") {
		t.row("rxq", "XDP-RX total "+pps(sum(v.rates("xdp_rxq_packets_total")))+" pps")
	} else if v.cur.Has("xdp_nic_rx_xdp_processed_packets_total") {
		t.row("rxq", "driver XDP packets "+pps(sum(v.rates("xdp_nic_rx_xdp_processed_packets_total")))+" pps (rxq collector off)")
	}
	if v.cur.Has("xdp_monitor_tracepoint_attached") {
		t.row("xdp", fmt.Sprintf("exceptions %s/s, redirect errors %s/s",
			pps(sum(v.rates("xdp_monitor_exceptions_total"))), pps(sum(v.rates("xdp_monitor_redirect_errors_total")))))
	}
	var polls, pkts float64
	for _, h := range HistogramRates(v.prev, v.cur, "xdp_napi_poll_work") {
		if v.selects(Series{Labels: h.Labels}) {
			polls += h.Count
			pkts += h.SumRate
		}
	}
	if polls > 0 {
		t.row("napi", fmt.Sprintf("%s polls/s, average bulk %.1f", pps(polls), pkts/polls))
	}
	if v.cur.Has("xdp_cpu_seconds_total") {
		var soft, idle, total float64
		for _, s := range Rates(v.prev, v.cur, "xdp_cpu_seconds_total") {
			total += s.Value
			switch s.Labels["mode"] {
			case "softirq":
				soft += s.Value
			case "idle", "iowait":
				idle += s.Value
			}
		}
		if total > 0 {
			t.row("cpu", fmt.Sprintf("%%soft %.1f, %%idle %.1f (all CPUs)", 100*soft/total, 100*idle/total))
		}
	}
	if v.cur.Has("xdp_drop_untracked_total") {
		t.row("drop", "stack drops "+pps(sum(v.rates("xdp_drop_packets_total")))+"/s")
	}
	return t.String()
}
