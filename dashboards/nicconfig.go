package dashboards

// The NIC's configuration behind what its queues show (the ethtool
// collector's link, coalescing, pause and RSS families and the pcie
// collector's interrupts per RX queue): the records the run view and the
// alerts' descriptions read, and the alerts on pause frames and on
// redirects into a device without ndo_xdp_xmit.
const (
	AlertPauseWhileDropping = "XDPNICPauseFramesWhileDropping"
	AlertRedirectNoNdoXmit  = "XDPRedirectIntoDeviceWithoutNdoXmit"
)

// minFrameWireBytes is a 64-byte frame on the wire: preamble and start
// delimiter (8), the frame (64) and the inter-frame gap (12).
const minFrameWireBytes = 84

func (r recorded) rssWeight() string {
	return "instance_device_queue:xdp_nic_rss_indirection_weight:ratio"
}
func (r recorded) queueInterrupts() string {
	return r.rate("instance_device_queue", "xdp_pcie_rx_queue_interrupts")
}
func (r recorded) packetsPerInterrupt() string {
	return r.ratio("instance_device_queue", "xdp_rx_queue_packets_per_interrupt")
}
func (r recorded) lineRate() string {
	return r.ratio("instance_device", "xdp_nic_port_rx_min_frame_line_rate")
}

// nicConfigRecordingRules: each RX queue's weight in the RSS indirection
// table (its entries over an even share of the table: 1 even, 2 twice its
// share, absent with no entry), its interrupt rate and packets per
// interrupt, and the port's offered packets as a share of the link's
// 64-byte line rate (148.8 Mpps at 100 Gbit/s).
func nicConfigRecordingRules(r recorded, h, sel string, sumRate func(by, series string) string) []Rule {
	entries := withSelector("xdp_nic_rss_indirection_entries", sel)
	rxQueues := "sum by (" + h + ", device) (" + withSelector(`xdp_nic_channels{channel=~"rx|combined"}`, sel) + ")"
	return []Rule{
		record(r.rssWeight(), entries+"\n/ on ("+h+", device) group_left ()\n(sum by ("+h+", device) ("+entries+") / "+rxQueues+")"),
		record(r.queueInterrupts(), sumRate(h+", device, queue", "xdp_pcie_rx_queue_interrupts_total")),
		record(r.packetsPerInterrupt(), "sum by ("+h+", device, queue) ("+r.rxQueue()+")\n/ on ("+h+", device, queue)\n("+r.queueInterrupts()+" > 0)"),
		record(r.lineRate(), "sum by ("+h+", device) ("+r.portRx()+")\n/ on ("+h+", device)\n(max by ("+h+", device) ("+
			withSelector("xdp_nic_link_speed_bytes_per_second", sel)+") / "+num(minFrameWireBytes)+")"),
	}
}

// rssTableVerdict is XDPRSSImbalance's sentence on the indirection table:
// a hot queue with more than cfg.RSSImbalance.UnevenTableWeight of an even
// share of the table is the table's doing (ethtool -X DEV equal N spreads
// it again); with an even table the flows themselves hash unevenly.
func rssTableVerdict(r recorded, cfg Config) string {
	w := num(cfg.RSSImbalance.UnevenTableWeight)
	return `{{ with printf "` + r.rssWeight() + `{instance='%s',device='%s',queue='%s'}" $labels.instance $labels.device $labels.queue | query }}` +
		`{{ if gt (. | first | value) ` + w + ` }}RSS table: the indirection table gives queue {{ $labels.queue }} {{ . | first | value | printf "%.1f" }}x an even share of its entries; spread it evenly (ethtool -X {{ $labels.device }} equal N) or weight it as intended.` +
		`{{ else }}The RSS table is even (queue {{ $labels.queue }} holds {{ . | first | value | printf "%.2f" }}x an even share): the flows hash unevenly, too few of them or a hash without the ports (xdp_nic_rss_hash_fields_info; ethtool -N {{ $labels.device }} rx-flow-hash udp4 sdfn).{{ end }}` +
		`{{ else }}{{ with printf "count(xdp_nic_rss_indirection_entries{instance='%s',device='%s'})" $labels.instance $labels.device | query }}` +
		`The RSS table gives queue {{ $labels.queue }} no entry: ntuple rules (xdp_nic_ntuple_rules) or RPS steer its packets, not RSS.` +
		`{{ else }}The driver does not report its RSS table (ethtool -x), so whether the table or the flows cause it is not known.{{ end }}{{ end }}`
}

// nicConfigAlerts: pause frames while the port drops, and redirects that
// fail for want of ndo_xdp_xmit.
func nicConfigAlerts(cfg Config, alert func(name, expr, forDur, severity, summary, description string) Rule) []Rule {
	r := recorded{cfg.RateWindow}
	h, sel := cfg.hostLabels(), cfg.Selector
	p := cfg.PauseWhileDropping
	pause := "sum by (" + h + ", device, direction) (rate(" + withSelector("xdp_nic_pause_frames_total", sel) + "[" + p.Window + "]))"
	drops := "sum by (" + h + ", device) (" + r.hostDrops() + ")"
	pauseAlert := alert(AlertPauseWhileDropping,
		pause+" > "+num(p.MinPauseFrames)+"\nand on ("+h+", device)\n"+drops+" > "+num(p.MinDrops),
		p.For, p.Severity,
		"{{ $labels.device }} on {{ $labels.instance }} {{ if eq $labels.direction \"rx\" }}receives{{ else }}sends{{ end }} pause frames while it drops packets",
		"{{ $value | humanize }} pause frames/s {{ if eq $labels.direction \"rx\" }}received: the link partner tells the port to stop sending, so its transmit (XDP_TX, redirects out of it, the stack's traffic) backs up in the TX rings"+
			"{{ else }}sent: the port's receive buffer fills and it asks the partner to pause; what it drops anyway is past what flow control holds back{{ end }}, while it drops "+
			queryValue("sum("+r.hostDrops()+instDevSel+")", "$labels.instance $labels.device", "humanize")+
			" packets/s for lack of host resources. Flow control hides drops at the sender: compare the partner's counters before raising RX rings (ethtool -a, ethtool -I -a).")

	n := cfg.RedirectNoNdoXmit
	noXmit := "count by (" + h + ") (" + withSelector(`xdp_netdev_xdp_feature{feature="ndo-xmit"}`, sel) + " == 0)"
	ndo := alert(AlertRedirectNoNdoXmit,
		"sum by ("+h+", device) (rate("+withSelector(`xdp_monitor_redirect_errors_total{errno="EOPNOTSUPP"}`, sel)+"[5m])) > 0\nand on ("+h+")\n"+noXmit+" > 0",
		n.For, n.Severity,
		"XDP redirects from {{ $labels.device }} fail with EOPNOTSUPP ({{ $labels.instance }}): a target lacks ndo_xdp_xmit",
		"{{ $value | humanize }} redirects/s from {{ $labels.device }} fail with EOPNOTSUPP, what the kernel answers a redirect into a device whose driver has no ndo_xdp_xmit (__xdp_enqueue, kernel/bpf/devmap.c). "+
			`Devices of this host without it (netdev xdp-features ndo-xmit): {{ range printf "xdp_netdev_xdp_feature{instance='%s',feature='ndo-xmit'} == 0" $labels.instance | query | sortByLabel "device" }}{{ .Labels.device }} {{ end }}`+
			"; redirect into a device that has it, or load an XDP program on the target (veth needs one to receive redirected frames).")
	return []Rule{pauseAlert, ndo}
}

// instDevSel selects one device of one instance in a description query.
const instDevSel = `{instance='%s',device='%s'}`
