package dashboards

// Set-up mistakes that the exported data already shows: a program in
// generic (skb) mode on a driver that runs XDP natively, and a redirect
// into a device with fewer TX queues than the host has CPUs.
const (
	AlertGenericMode          = "XDPGenericModeOnNativeDriver"
	AlertRedirectTargetQueues = "XDPRedirectTargetFewerTXQueuesThanCPUs"
)

// setupAlerts are the set-up mistakes' alerts, built with AlertingRules'
// alert constructor.
func setupAlerts(cfg Config, alert func(name, expr, forDur, severity, summary, description string) Rule) []Rule {
	h, sel := cfg.hostLabels(), cfg.Selector
	g := cfg.GenericMode
	// Generic mode runs the program after the stack has built an skb for
	// the packet (netif_receive_generic_xdp): the allocation XDP exists to
	// avoid. A device whose driver reports the basic XDP feature runs it
	// before any allocation.
	generic := alert(AlertGenericMode,
		"group by ("+h+", device, prog_id, name) ("+withSelector(`xdp_bpf_prog_info{attach_mode="generic"}`, sel)+")\n"+
			"and on ("+h+", device)\n("+withSelector(`xdp_netdev_xdp_feature{feature="basic"}`, sel)+" == 1)",
		g.For, g.Severity,
		"XDP program {{ $labels.name }} runs in generic mode on {{ $labels.device }}, whose driver runs XDP natively ({{ $labels.instance }})",
		"{{ $labels.name }} (id {{ $labels.prog_id }}) is attached in generic (skb) mode: it runs after the kernel allocated an skb for every packet, "+
			"while {{ $labels.device }}'s driver reports native XDP (netdev xdp-features basic). Attach it in native mode (ip link set dev {{ $labels.device }} xdpdrv, "+
			"xdp-loader load -m native, or XDP_FLAGS_DRV_MODE).")

	q := cfg.RedirectTargetQueues
	// ndo_xdp_xmit picks the target's TX queue by the redirecting CPU's
	// number: i40e (i40e_xdp_xmit, drivers/net/ethernet/intel/i40e/i40e_txrx.c)
	// and mlx5 (mlx5e_xdp_xmit, drivers/net/ethernet/mellanox/mlx5/core/en/xdp.c)
	// refuse frames from CPUs numbered at or above their queue count with
	// ENXIO; ice (ice_xdp_xmit, drivers/net/ethernet/intel/ice/ice_txrx.c)
	// shares its XDP rings under a lock then. XDP_TX uses the RX queue's
	// own ring on these drivers, so only redirect targets are read here.
	targets := `label_replace(sum by (` + h + `, to_device) (rate(` + withSelector("xdp_monitor_devmap_xmit_bulks_total", sel) + `[5m])) > 0, "device", "$1", "to_device", "(.*)")`
	txQueues := "sum by (" + h + ", device) (" + withSelector(`xdp_nic_channels{channel=~"tx|combined"}`, sel) + ")"
	cpus := "count by (" + h + ") (" + withSelector(`xdp_cpu_seconds_total{mode="idle"}`, sel) + ")"
	few := alert(AlertRedirectTargetQueues,
		"group by ("+h+", device) ("+targets+")\n* on ("+h+", device) group_left ()\n"+txQueues+"\n< on ("+h+") group_left ()\n"+cpus,
		q.For, q.Severity,
		"{{ $labels.device }} receives XDP redirects on {{ $value }} TX queues, fewer than the CPUs of {{ $labels.instance }}",
		"Frames redirected into {{ $labels.device }} (xdp:xdp_devmap_xmit) go out on the TX queue of the redirecting CPU's number; the device has {{ $value }} TX queues and the host "+
			queryValue(`count(xdp_cpu_seconds_total{instance='%s',mode='idle'})`, "$labels.instance", `printf "%.0f"`)+
			" CPUs: redirects from the CPUs numbered {{ $value }} and above fail with ENXIO (i40e, mlx5) or share a ring under a lock (ice). "+
			"Give the device as many channels as CPUs (ethtool -L), or keep the redirecting RX queues' IRQs on CPUs below {{ $value }}.")
	return []Rule{generic, few}
}
