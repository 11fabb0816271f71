package dashboards

// fleetBoard aggregates per host from the recording rules in
// rules/recording.yml, so each panel reads one pre-computed series per host
// instead of rating every per-CPU and per-queue series of hundreds of hosts.
func fleetBoard(cfg Config) board {
	r := recorded{cfg.RateWindow}
	f0 := 0.0
	inst := "{" + selInst + "}"
	top := func(expr string) string { return "topk(20, " + expr + ")" }
	return board{
		uid:   "xdp-fleet-view",
		title: "XDP fleet view",
		file:  "xdp-fleet-view.json",
		description: "XDP signals per host across the fleet, from the recording rules in dashboards/rules/recording.yml (load them in Prometheus). " +
			"Top-20 panels keep the graphs readable with hundreds of instances.",
		multiHost: true,
		// The per-device recorded series the view reads: what the edge
		// ships to a global tier (Shipped), where the raw families are not.
		devices: r.deviceXDP() + "|" + r.hostDrops(),
		rows: []row{
			{title: "Traffic", tool: "none: one terminal per host does not scale", panels: []panel{
				{
					title: "XDP packets per host (top 20)", unit: "pps", min: &f0,
					description: "Packets/s XDP processed per host: the rxq program's count where it runs (it is opt-in), else the driver's per-queue XDP counters, else the attached programs' run counts (with BPF stats on).",
					targets:     []target{{refID: "A", expr: top(r.hostXDP() + inst), legend: "{{instance}}"}},
				},
				{
					title: "XDP verdicts across the fleet", unit: "pps", min: &f0,
					description: "Driver-counted XDP verdicts summed over the selected hosts.",
					targets:     []target{{refID: "A", expr: "sum by (action) (" + r.hostActions() + inst + ")", legend: "{{action}}"}},
				},
				{
					title: "XDP verdicts per host (top 20)", unit: "pps", min: &f0,
					description: "Packets/s by verdict on each host where the rxq collector runs: in observe mode (--collector.rxq.observe) the verdicts of the XDP programs the host runs in production.",
					targets:     []target{{refID: "A", expr: top(r.hostVerdicts() + inst), legend: "{{instance}} {{action}}"}},
				},
				{
					title: "Busiest devices (top 20)", unit: "pps", min: &f0,
					description: "Per-device packets/s XDP processed: the rxq program's count, else the driver's per-queue XDP counters.",
					targets:     []target{{refID: "A", expr: top(r.deviceXDP() + "{" + selInstDev + "}"), legend: "{{instance}} {{device}}"}},
				},
				{
					title: "Host-resource drops per host (top 20)", unit: "pps", min: &f0,
					description: "Packets the NICs of each host dropped for lack of host resources, before XDP ran (xdp_nic_rx_host_drops_total, from each device's best source): at the port (its buffer full: PCIe, memory, DDIO) and on the rings (no descriptor posted), where the driver tells them apart.",
					targets: []target{
						{refID: "A", expr: top(r.hostHostDrops() + inst), legend: "{{instance}} {{where}}"},
					},
				},
			}},
			{title: "CPU", tool: "mpstat and xdp_rxq_info on every host", panels: []panel{
				{
					title: "RX CPU idle per host (least idle 20)", unit: "percentunit", min: &f0,
					description: "Mean idle share of the RX CPUs. Low idle with drops: CPU-bound. High idle with drops: PCIe/DDIO-bound.",
					targets:     []target{{refID: "A", expr: "bottomk(20, " + r.rxIdle() + inst + ")", legend: "{{instance}}"}},
				},
				{
					title: "RX CPU softirq share per host (top 20)", unit: "percentunit", min: &f0,
					description: "Mean softirq share of the RX CPUs.",
					targets:     []target{{refID: "A", expr: top(r.rxSoftirq() + inst), legend: "{{instance}}"}},
				},
				{
					title: "RSS imbalance per host (top 20)", unit: "short", min: &f0, runbook: AlertRSSImbalance,
					description: "Each host's most uneven device: its busiest RX queue over the mean of its busy queues; alert " + AlertRSSImbalance + " fires above " + num(cfg.RSSImbalance.MaxOverMean) + ".",
					targets:     []target{{refID: "A", expr: top("max by (" + cfg.hostLabels() + ") (" + r.rxImbalance() + inst + ")"), legend: "{{instance}}"}},
				},
				{
					title: "Worst RX CPU cache-miss ratio per host (top 20)", unit: "percentunit", min: &f0, exempt: exemptPerf,
					description: "The highest LLC miss ratio among each host's RX CPUs (DDIO leaking to memory).",
					targets:     []target{{refID: "A", expr: top(r.hostCacheMiss() + inst), legend: "{{instance}}"}},
				},
			}},
			{title: "PCIe and NUMA", tool: "lspci -vv and numactl on every host", panels: []panel{
				{
					title: "Degraded PCIe links per host", unit: "short", min: &f0, exempt: exemptLink, runbook: AlertPCIeLinkDegraded,
					description: "Links on the NICs' paths that trained below what both their ends can do, per host.",
					targets:     []target{{refID: "A", expr: "count by (instance) (xdp_pcie_link_degraded" + inst + " == 1)", legend: "{{instance}}"}},
				},
				{
					title: "Remote NUMA share, worst device per host (top 20)", unit: "percentunit", min: &f0, exempt: exemptLink, runbook: AlertRemoteNUMA,
					description: "The highest share of a device's XDP packets or received packets processed on CPUs of another node than the NIC's.",
					targets: []target{
						{refID: "A", expr: top("max by (instance) (" + r.xdpRemote() + inst + ")"), legend: "{{instance}} XDP"},
						{refID: "B", expr: top("max by (instance) (" + r.rxRemote() + inst + ")"), legend: "{{instance}} NIC RX"},
					},
				},
				{
					title: "Estimated PCIe use, busiest device per host (top 20)", unit: "percentunit", min: &f0, exempt: exemptLink, runbook: AlertPCIeBusy,
					description: "Estimated PCIe bytes/s over the narrowest link's bandwidth, the busier direction of each host's busiest device.",
					targets: []target{{refID: "A", expr: top("max by (instance) (" + r.pcieEstimate() + inst + " / on (" + cfg.hostLabels() + ", device) group_left () " + r.pcieBandwidth() + inst + ")"),
						legend: "{{instance}}"}},
				},
				{
					title: "PCIe AER errors per host (top 20)", unit: "ops", min: &f0, exempt: exemptLink, runbook: AlertPCIeAERCorr,
					description: "Advanced Error Reporting errors per second of the NICs' functions, by type.",
					targets:     []target{{refID: "A", expr: top(r.hostAER() + inst), legend: "{{instance}} {{class}}"}},
				},
			}},
			{title: "NAPI, errors and the exporter", tool: "napi_monitor and xdp_monitor on every host", panels: []panel{
				{
					title: "NAPI budget exhausted and ksoftirqd share per host (top 20)", unit: "percentunit", min: &f0,
					description: "Share of NAPI polls that used their whole budget, and share that ran in ksoftirqd.",
					targets: []target{
						{refID: "A", expr: top(r.hostNAPIExh() + inst), legend: "{{instance}} budget exhausted"},
						{refID: "B", expr: top(r.hostNAPIKsi() + inst), legend: "{{instance}} ksoftirqd", needs: "NAPI polls in ksoftirqd (softirq overload)"},
					},
				},
				{
					title: "XDP exceptions and redirect errors per host (top 20)", unit: "pps", min: &f0,
					description: "xdp:xdp_exception and xdp:xdp_redirect_err per host. The series exist only after the first event.",
					needs:       "an XDP exception or a failing redirect",
					targets: []target{
						{refID: "A", expr: top(r.hostExc() + inst), legend: "{{instance}} exceptions"},
						{refID: "B", expr: top(r.hostRedirErr() + inst), legend: "{{instance}} redirect errors"},
					},
				},
				{
					title: "Failing exporter collectors", unit: "short", min: &f0,
					description: "Hosts per collector whose last scrape failed (xdp_scrape_collector_success == 0): a missing capability, a refused program, a driver error. What a host's kernel lacks is not here but in the next panel.",
					needs:       "a collector that fails on the host",
					targets:     []target{{refID: "A", expr: "count by (collector) (xdp_scrape_collector_success" + inst + " == 0)", legend: "{{collector}}"}},
				},
				{
					title: "Collectors unsupported on a host", unit: "short", min: &f0,
					description: "Hosts per collector whose kernel lacks what the collector reads (xdp_scrape_collector_unsupported == 1: no BTF, no AF_XDP socket diag, no netdev netlink family). Not a failure; logged once at INFO on the host.",
					needs:       "a host whose kernel lacks a collector's feature",
					targets:     []target{{refID: "A", expr: "count by (collector) (xdp_scrape_collector_unsupported" + inst + " == 1)", legend: "{{collector}}"}},
				},
				{
					title: "Series per host and collector (top 20)", unit: "short", min: &f0, tool: "curl -s HOST:9739/metrics | wc -l on every host",
					description: "The series each collector of each host sent in its last scrape (xdp_scrape_collector_series): where a host's cardinality comes from. " +
						"docs/cardinality.md says how to steer it with --collector.NAME.metrics-include/-exclude and device-include/-exclude.",
					targets: []target{{refID: "A", expr: top("xdp_scrape_collector_series" + inst), legend: "{{instance}} {{collector}}"}},
				},
				{
					title: "Firing XDP alerts", unit: "short", min: &f0,
					description: "Alerts from rules/alerts.yml firing now, by name.",
					needs:       "a firing alert (rules/alerts.yml loaded)",
					targets:     []target{{refID: "A", expr: `count by (alertname) (ALERTS{alertstate="firing",alertname=~"XDP.*",` + selInst + `})`, legend: "{{alertname}}"}},
				},
			}},
		},
	}
}
