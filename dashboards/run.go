package dashboards

func sumBy(by, metric, matchers string) string {
	return "sum by (" + by + ") (" + rate(metric, matchers) + ")"
}

func withTitle(p panel, title string) panel {
	p.title = title
	return p
}

func runBoard(cfg Config) board {
	f0 := 0.0
	rec, lab := recorded{cfg.RateWindow}, recorded{cfg.Lab.RateWindow}
	perCPUShare := func(mode string) string { return rec.rxCPUMode() + "{" + selInst + `,mode="` + mode + `"}` }
	devmap := func(family string) string {
		return "rate(" + family + "{" + selInst + `,from_device=~"$device"}` + ri + ")"
	}
	recDev := func(series string) string { return series + "{" + selInstDev + "}" }
	const eventNote = "The series exist only after the first event; no data means none happened."
	return board{
		uid:   "xdp-run-view",
		title: "XDP run view",
		file:  "xdp-run-view.json",
		description: "One host during a benchmark run: what xdp_rxq_info, xdp_monitor, napi_monitor, ethtool_stats.pl and mpstat showed in five terminals. " +
			"Pick one instance; devices are a multi-select.",
		rows: []row{
			{title: "Packet rates (xdp_rxq_info)", tool: "xdp_rxq_info", panels: []panel{
				{
					title:       "XDP packets per CPU",
					description: "Packets/s the rxq program saw on each CPU (xdp_rxq_info 'XDP-RX CPU'). Uneven lines are RSS imbalance.",
					unit:        "pps", min: &f0,
					targets: []target{{refID: "A", expr: sumBy("cpu", "xdp_rxq_packets_total", selInstDev), legend: "cpu {{cpu}}"}},
				},
				{
					title:       "XDP packets per RX queue",
					description: "Packets/s by RX queue (xdp_rxq_info 'rx_queue_index').",
					unit:        "pps", min: &f0,
					targets: []target{{refID: "A", expr: sumBy("device, queue", "xdp_rxq_packets_total", selInstDev), legend: "{{device}} rxq {{queue}}"}},
				},
				{
					title: "XDP verdicts by RX queue and CPU",
					description: "Packets/s by RX queue, CPU and verdict: the verdict the rxq program returns (attach mode), or with --collector.rxq.observe the verdicts " +
						"of the programs already attached (a load balancer's or DDoS filter's own XDP program, seen through fexit; a libxdp dispatcher's chain counts as one verdict).",
					unit: "pps", min: &f0,
					targets: []target{{refID: "A", expr: sumBy("device, queue, cpu, action", "xdp_rxq_packets_total", selInstDev), legend: "{{device}} rxq {{queue}} cpu {{cpu}} {{action}}"}},
				},
				{
					title: "Verdicts per component of libxdp's dispatcher",
					description: "Observe mode where xdp-loader or an AF_XDP socket put libxdp's dispatcher on the device: packets/s each component program returned, by verdict. " +
						"A verdict in the component's chain-call actions (XDP_PASS by default) hands the packet to the next component, which counts it again; any other ends the chain and is the device's.",
					unit: "pps", min: &f0,
					exempt:  "needs libxdp's dispatcher and fexit: this lab's kernel refuses tracing programs (the kernel matrix counts components on Debian's kernels)",
					targets: []target{{refID: "A", expr: sumBy("device, prog_id, name, action", "xdp_rxq_component_packets_total", selInstDev), legend: "{{device}} {{name}} ({{prog_id}}) {{action}}"}},
				},
				{
					title: "RX queue x CPU: which CPU serves which queue",
					description: "xdp_rxq_info's RXQ:CPU rows as a table: packets/s of each RX queue on each CPU, with the queue's NAPI id, IRQ (xdp_netdev_queue_info, where the driver reports them) and the CPUs its IRQ runs on (xdp_netdev_irq_affinity_info). " +
						"Several busy queues on one CPU while other CPUs idle is the i40e RSS example's RSS/IRQ-affinity imbalance.",
					kind: kindTable, unit: "pps", width: 12, runbook: AlertRXQueuesShareCPU,
					targets: []target{{refID: "A", instant: true, expr: recDev(rec.queueCPUIRQ())},
						{refID: "B", instant: true, expr: "xdp_netdev_irq_affinity_info{" + selInstDev + "}", exempt: "IRQ affinity: veth has no IRQ"}},
				},
				{
					title: "RSS imbalance: busiest RX queue / mean, and busy queues per CPU",
					description: "The busiest RX queue's packet rate over the mean of the busy queues (above 1 kpps): 1 is even, the i40e RSS example's five queues at 180 kpps and one at 907 kpps is 3.0. " +
						"Counted by the rxq collector where it runs, else by the NIC's per-queue counters (netdev qstats, ethtool -S): the legend names the source. And the number of busy queues each CPU serves.",
					unit: "short", min: &f0, runbook: AlertRSSImbalance,
					targets: []target{
						{refID: "A", expr: recDev(rec.rxImbalance()), legend: "{{device}} queue max / mean ({{source}})"},
						{refID: "B", expr: "count by (cpu) (" + recDev(rec.queueCPURxq()) + " > " + num(cfg.RXQueuesShareCPU.MinQueuePackets) + ")", legend: "cpu {{cpu}} busy queues"},
					},
				},
				{
					title:       "Packets the rxq program could not attribute",
					description: "xdp_rxq_info's issue-pps: ingress ifindex mismatch or queue index beyond the device's queues. " + eventNote,
					unit:        "pps", min: &f0, needs: "a packet with a mismatching ifindex or an out-of-range queue",
					targets: []target{{refID: "A", expr: sumBy("device, reason", "xdp_rxq_issues_total", selInstDev), legend: "{{device}} {{reason}}"}},
				},
			}},
			{title: "XDP verdicts and errors (xdp_monitor)", tool: "xdp_monitor", panels: []panel{
				{
					title:       "XDP action rates per RX queue (driver counters)",
					description: "Packets/s by RX queue and the verdict the driver counted (ethtool -S rx<N>_xdp_drop/_tx/_redirect/_pass, veth rx_queue_<N>_xdp_*): the per-queue XDP counters without the rxq program.",
					unit:        "pps", min: &f0,
					targets: []target{{refID: "A", expr: sumBy("device, queue, action", "xdp_nic_rx_xdp_packets_total", selInstDev), legend: "{{device}} rxq {{queue}} {{action}}"}},
				},
				{
					title:       "XDP_TX failures",
					description: "XDP_TX frames the driver could not send back out, per RX queue and reason (ethtool -S mlx5 rx<N>_xdp_tx_full/_err, veth rx_queue_<N>_xdp_tx_errors), and the drops and errors of XDP_TX bulk flushes (xdp:xdp_bulk_tx). " + eventNote,
					unit:        "pps", min: &f0, needs: "an XDP_TX frame the driver cannot send",
					targets: []target{
						{refID: "A", expr: sumBy("device, queue, reason", "xdp_nic_rx_xdp_tx_failures_total", selInstDev), legend: "{{device}} rxq {{queue}} {{reason}}"},
						{refID: "B", expr: sumBy("device", "xdp_monitor_bulk_tx_drops_total", selInstDev), legend: "{{device}} bulk tx drops"},
						{refID: "C", expr: sumBy("device", "xdp_monitor_bulk_tx_errors_total", selInstDev), legend: "{{device}} bulk tx errors"},
					},
				},
				{
					title:       "XDP exceptions",
					description: "xdp:xdp_exception: XDP_ABORTED, invalid verdicts, failed XDP_TX/REDIRECT. " + eventNote,
					unit:        "pps", min: &f0, needs: "an XDP exception (a program returning XDP_ABORTED)",
					targets: []target{{refID: "A", expr: sumBy("device, action", "xdp_monitor_exceptions_total", selInstDev), legend: "{{device}} {{action}}"}},
				},
				{
					title:       "Redirect errors by errno",
					description: "xdp:xdp_redirect_err by errno. " + eventNote,
					unit:        "pps", min: &f0, needs: "a failing redirect (e.g. to a device that is down: ENETDOWN)",
					targets: []target{{refID: "A", expr: sumBy("device, errno", "xdp_monitor_redirect_errors_total", selInstDev), legend: "{{device}} {{errno}}"}},
				},
				{
					title:       "devmap bulk transmit: packets, drops and bulk average",
					description: "xdp:xdp_devmap_xmit: frames redirected and sent per egress device, drops, and frames per bulk (xdp_monitor's bulk-average, 16 is the maximum).",
					unit:        "pps", min: &f0, needs: "--collector.monitor.xmit and XDP_REDIRECT through a devmap (--collector.rxq.action=redirect)",
					targets: []target{
						{refID: "A", expr: sumBy("from_device, to_device", "xdp_monitor_devmap_xmit_packets_total", selInst+`,from_device=~"$device"`), legend: "{{from_device}} -> {{to_device}} sent"},
						{refID: "B", expr: sumBy("from_device, to_device", "xdp_monitor_devmap_xmit_drops_total", selInst+`,from_device=~"$device"`), legend: "{{from_device}} -> {{to_device}} drops"},
						{refID: "C", expr: devmap("xdp_monitor_devmap_xmit_packets_total") + " / " + devmap("xdp_monitor_devmap_xmit_bulks_total"), legend: "{{from_device}} -> {{to_device}} bulk average", unit: "short", unitLabel: "frames per bulk"},
					},
				},
				{
					title:       "XDP_TX bulk transmit: packets and bulk average",
					description: "xdp:xdp_bulk_tx (veth XDP_TX flushes): frames sent per device and frames per flush.",
					unit:        "pps", min: &f0, needs: "--collector.monitor.xmit and XDP_TX on veth (--collector.rxq.action=tx)",
					targets: []target{
						{refID: "A", expr: sumBy("device", "xdp_monitor_bulk_tx_packets_total", selInstDev), legend: "{{device}} sent"},
						{refID: "B", expr: sumBy("device", "xdp_monitor_bulk_tx_packets_total", selInstDev) + " / " + sumBy("device", "xdp_monitor_bulk_tx_bulks_total", selInstDev), legend: "{{device}} bulk average", unit: "short", unitLabel: "frames per bulk"},
					},
				},
				{
					title:       "cpumap: enqueued, drops and bulk average",
					description: "xdp:xdp_cpumap_enqueue and xdp:xdp_cpumap_kthread: frames moved to another CPU, drops on a full queue or in the kthread, and frames per enqueue bulk. " + eventNote,
					unit:        "pps", min: &f0, needs: "--collector.monitor.xmit and an XDP program redirecting into a cpumap",
					targets: []target{
						{refID: "A", expr: sumBy("to_cpu", "xdp_monitor_cpumap_enqueue_packets_total", selInst), legend: "to cpu {{to_cpu}} enqueued"},
						{refID: "B", expr: sumBy("to_cpu", "xdp_monitor_cpumap_enqueue_drops_total", selInst), legend: "to cpu {{to_cpu}} enqueue drops"},
						{refID: "C", expr: sumBy("cpu", "xdp_monitor_cpumap_kthread_drops_total", selInst), legend: "kthread cpu {{cpu}} drops"},
						{refID: "D", expr: sumBy("to_cpu", "xdp_monitor_cpumap_enqueue_packets_total", selInst) + " / " + sumBy("to_cpu", "xdp_monitor_cpumap_enqueue_bulks_total", selInst), legend: "to cpu {{to_cpu}} bulk average", unit: "short", unitLabel: "frames per bulk"},
					},
				},
			}},
			{title: "PCIe and NUMA (lspci -vv, numactl)", tool: "lspci -vv, /proc/irq, numactl", panels: []panel{
				{
					title:       "PCIe links below their capability",
					description: "Each link on the selected NICs' paths (hop 0: the NIC's own link; 2, 4, ...: a switch's link above it): 1 if it trained below what both its ends can do (lspci's LnkSta against LnkCap), 0 if not.",
					kind:        kindTable, unit: "short", width: 12, exempt: exemptLink, runbook: AlertPCIeLinkDegraded,
					targets: []target{{refID: "A", instant: true, expr: "xdp_pcie_link_degraded{" + selInstDev + "}"}},
				},
				{
					title:       "RX queue IRQs and their NUMA locality",
					description: "Each RX queue's IRQ, the CPUs it runs on, and the share of those CPUs on another NUMA node than the NIC (0 local, 1 remote).",
					kind:        kindTable, unit: "percentunit", width: 12, exempt: exemptLink, runbook: AlertRemoteNUMA,
					targets: []target{{refID: "A", instant: true, expr: "xdp_pcie_rx_queue_numa_remote_ratio{" + selInstDev + "}"}},
				},
				{
					title:       "Packets processed on CPUs remote from the NIC",
					description: "Share of the XDP packets (rxq collector, per CPU) and of the NIC's received packets (qstats, per queue, by its IRQ's CPUs) processed on another NUMA node than the NIC's: DDIO put them in the other socket's cache.",
					unit:        "percentunit", min: &f0, exempt: exemptLink, runbook: AlertRemoteNUMA,
					targets: []target{
						{refID: "A", expr: rec.xdpRemote() + "{" + selInstDev + "}", legend: "{{device}} XDP"},
						{refID: "B", expr: rec.rxRemote() + "{" + selInstDev + "}", legend: "{{device}} NIC RX"},
					},
				},
				{
					title:       "PCIe traffic, measured and estimated, against the narrowest link",
					description: "Bytes/s the NIC moves over PCIe in each direction: estimated from its qstats by a per-packet overhead model (docs/runbook.md#xdppciebusy, an upper bound), and measured at the root complex it is behind by the uncore IIO counters (perf iostat's figures, payload only), against the theoretical bandwidth of the narrowest link on its path.",
					unit:        "Bps", min: &f0, exempt: exemptLink, runbook: AlertPCIeBusy,
					targets: []target{
						{refID: "A", expr: rec.pcieEstimate() + "{" + selInstDev + "}", legend: "{{device}} {{direction}} estimate"},
						{refID: "B", expr: rec.pcieBandwidth() + "{" + selInstDev + "}", legend: "{{device}} narrowest link"},
						{refID: "C", expr: rec.pcieMeasured() + "{" + selInstDev + "}", legend: "{{device}} {{direction}} measured", exempt: exemptUnc},
					},
				},
				{
					title:       "DDIO: device writes missing the LLC, per socket",
					description: "Share of the devices' full-line writes to memory (ItoM, ItoMCacheNear) that missed the last-level cache, per socket, from the uncore CHA counters (pcm-pcie's miss split): packet data DDIO could not place in the cache. Above the alert's 20%, shrink the RX rings or use fewer queues (docs/runbook.md#xdpddiowritemisshigh).",
					unit:        "percentunit", min: &f0, max: ptr(1.0), exempt: exemptUnc, runbook: AlertDDIOWriteMiss,
					targets: []target{{refID: "A", expr: rec.ddioWriteMiss() + "{" + selInst + "}", legend: "socket {{socket}}"}},
				},
				{
					title:       "PCIe AER errors",
					description: "Advanced Error Reporting errors of the NICs' functions per second, by type and name (aer_dev_correctable, _nonfatal, _fatal).",
					unit:        "ops", min: &f0, exempt: exemptLink, runbook: AlertPCIeAERCorr,
					targets: []target{{refID: "A", expr: sumBy("device, class, error", "xdp_pcie_aer_errors_total", selInstDev), legend: "{{device}} {{class}} {{error}}"}},
				},
			}},
			{title: "Stack drops (dropwatch)", tool: "dropwatch, pwru", panels: []panel{
				{
					title: "Packets the stack dropped, by reason",
					description: "Packets/s the kernel freed as dropped after XDP passed them on or without XDP (skb:kfree_skb), by device and the kernel's drop reason: NETFILTER_DROP for a firewall rule, NO_SOCKET for a closed port, CPU_BACKLOG or SOCKET_RCVBUFF for overload. " +
						"Frames XDP drops are not skbs and do not show here. " + eventNote,
					unit: "pps", min: &f0, runbook: AlertStackDrops, needs: "--collector.drop and packets the stack drops (the lab's linux scenario)",
					targets: []target{{refID: "A", expr: sumBy("device, reason", "xdp_drop_packets_total", selInst+`,device=~"$device|"`), legend: "{{device}} {{reason}}"}},
				},
			}},
			{title: "NAPI and softirq (napi_monitor, mpstat)", tool: "napi_monitor and mpstat", panels: []panel{
				{
					title:       "NAPI bulk: packets per poll",
					description: "How many packets each NAPI poll processed (napi:napi_poll work), as a heatmap over time: napi_monitor's bulk[00]..bulk[64]. A loaded NIC sits at 64, the budget.",
					kind:        kindHeatmap, unit: "short",
					targets: []target{{refID: "A", expr: sumBy("le", "xdp_napi_poll_work_bucket", selInstDev), legend: "{{le}}"}},
				},
				{
					title:       "Average NAPI bulk by context",
					description: "Packets per poll by where the poll ran: from idle (softirq after an interrupt), ksoftirqd (deferred), threaded NAPI. napi_monitor's 'average bulk'.",
					unit:        "short", min: &f0,
					targets: []target{{refID: "A", expr: sumBy("device, context", "xdp_napi_poll_work_sum", selInstDev) + " / " + sumBy("device, context", "xdp_napi_poll_work_count", selInstDev),
						legend: "{{device}} {{context}}"}},
				},
				{
					title:       "NAPI polls: from idle vs ksoftirqd, and budget exhausted",
					description: "Polls/s by context and the polls that used the whole budget. Many ksoftirqd polls with the budget exhausted is softirq overload.",
					unit:        "ops", min: &f0,
					targets: []target{
						{refID: "A", expr: sumBy("device, context", "xdp_napi_poll_work_count", selInstDev), legend: "{{device}} {{context}} polls"},
						{refID: "B", expr: sumBy("device, context", "xdp_napi_polls_budget_exhausted_total", selInstDev), legend: "{{device}} {{context}} budget exhausted"},
					},
				},
				{
					title: "%soft, %irq and %idle per RX CPU",
					description: "Share of each RX CPU's time in softirq, hard interrupts and idle (mpstat %soft, %irq, %idle). The RX CPUs are the ones the rxq program counts packets on (the queue -> CPU map); without the rxq collector every CPU is shown. " +
						"RX CPUs with idle time while the NIC discards point at PCIe or memory, not the CPU.",
					unit: "percentunit", min: &f0, runbook: AlertNICDropsWhileIdle,
					targets: []target{
						{refID: "A", expr: perCPUShare("softirq"), legend: "cpu {{cpu}} %soft"},
						{refID: "B", expr: perCPUShare("irq"), legend: "cpu {{cpu}} %irq"},
						{refID: "C", expr: perCPUShare("idle"), legend: "cpu {{cpu}} %idle"},
					},
				},
				withTitle(cacheMissPanel(rec), "Cache-miss ratio per RX CPU (perf stat)"),
				withTitle(ipcPanel(rec), "Instructions per cycle per RX CPU (perf stat)"),
				{
					title:       "NET_RX softirqs and squeezed runs per CPU",
					description: "NET_RX softirq runs per CPU (/proc/softirqs) and softnet time_squeeze (the softirq ran out of budget or time with work left).",
					unit:        "ops", min: &f0,
					targets: []target{
						{refID: "A", expr: sumBy("cpu", "xdp_cpu_softirqs_total", selInst+`,vector="NET_RX"`), legend: "cpu {{cpu}} NET_RX"},
						{refID: "B", expr: sumBy("cpu", "xdp_cpu_softnet_times_squeezed_total", selInst), legend: "cpu {{cpu}} squeezed"},
					},
				},
			}},
			{title: "NIC counters (ethtool_stats.pl)", tool: "ethtool -S / ethtool_stats.pl", panels: []panel{
				{
					title: "Every driver stat that changed, per second",
					description: "ethtool_stats.pl's view: each ethtool -S counter of the selected devices that moved over the rate window, per second, by its exporter family (stat) and labels. " +
						"Curated families (rx_xdp_packets, rx_page_cache_events, ...) appear under their name; the driver's other stats as stat_<name> and queue_stat_<name>.",
					kind: kindTable, unit: "ops", width: 12, height: 10,
					targets: []target{{refID: "A", instant: true, expr: recDev(lab.changedStats())}},
				},
				{
					title:       "Channels, rings and private flags",
					description: "What the benchmark notes' experiments change: channels (ethtool -l), ring sizes (ethtool -g) and driver private flags such as mlx5 rx_cqe_compress (ethtool --show-priv-flags). The value is the count, the descriptors, or 1/0 for a flag.",
					kind:        kindTable, width: 12, height: 10,
					targets: []target{{refID: "A", instant: true, expr: `{__name__=~"xdp_nic_(channels|ring_descriptors|private_flag_enabled)",` + selInstDev + `}`}},
				},
				{
					title:       "Port received vs delivered",
					description: "Packets/s the port received, the offered load (xdp_nic_port_packets_total: ethtool's eth-mac FramesReceivedOK, else the driver's own port counter, as xdp_nic_signal_source_info says), against packets the driver delivered to XDP and the stack (netdev qstats rx-packets). The gap is what the NIC dropped.",
					unit:        "pps", min: &f0, exempt: exemptPort,
					targets: []target{
						{refID: "A", expr: sumBy("device", "xdp_nic_port_packets_total", selInstDev+`,direction="rx"`), legend: "{{device}} port received"},
						{refID: "B", expr: sumBy("device", "xdp_netdev_qstats_rx_packets_total", selInstDev), legend: "{{device}} delivered (qstats)",
							exempt: "netdev qstats rx-packets: veth implements no queue stats"},
					},
				},
				{
					title:       "Drops for lack of host resources",
					description: "Packets the NIC dropped before XDP ran (xdp_nic_rx_host_drops_total; the counters behind each in xdp_nic_signal_source_info): where=port, the port had nowhere to put them (PCIe/host back-pressure: mlx5 rx_discards_phy, ice rx_dropped.nic, ixgbe rx_missed_errors); where=ring, no RX descriptor or buffer was posted (the driver did not refill in time: mlx5 rx_out_of_buffer); no where, a standard counter that does not tell (qstats rx-hw-drop-overruns, rtnl_link_stats64).",
					unit:        "pps", min: &f0, runbook: AlertRxOutOfBuffer,
					targets: []target{
						{refID: "A", expr: sumBy("device, where", "xdp_nic_rx_host_drops_total", selInstDev), legend: "{{device}} {{where}}"},
					},
				},
				{
					title: "Link, coalescing, pause and RSS settings",
					description: "Why the queues look the way they do: link speed (bytes/s), interrupt coalescing (ethtool -c: delay in seconds, max frames, adaptive 1/0 per direction), pause settings (ethtool -a, 1/0), the RSS hash function and table size (ethtool -x) and ntuple rules (ethtool -n). " +
						"A driver without a call has no row (veth has the link only).",
					kind: kindTable, width: 12, height: 10,
					targets: []target{{refID: "A", instant: true, expr: `{__name__=~"xdp_nic_(link_speed_bytes_per_second|coalesce_.*|pause_enabled|pause_autoneg_enabled|rss_info|ntuple_rules)",` + selInstDev + `}`}},
				},
				{
					title: "Offered load as a share of the 64-byte line rate",
					description: "Packets/s the port received over the packets/s the link carries at 64-byte frames (link speed / 84 bytes on the wire: 148.8 Mpps at 100 Gbit/s). " +
						"The XDP paper's generator reached 88-99 Mpps on 100 Gbit/s: 0.6-0.67 here.",
					unit: "percentunit", min: &f0, width: 12, exempt: exemptPort,
					targets: []target{{refID: "A", expr: recDev(rec.lineRate()), legend: "{{device}}"}},
				},
				{
					title: "RSS table weight per RX queue",
					description: "Each RX queue's entries in the RSS indirection table over an even share (1: its share; 2: twice it; no bar: no entry). " +
						"Next to the packets per RX queue it tells an uneven table from flows that hash unevenly (" + AlertRSSImbalance + ").",
					unit: "short", min: &f0, runbook: AlertRSSImbalance, exempt: exemptRSS,
					targets: []target{{refID: "A", expr: recDev(rec.rssWeight()), legend: "{{device}} queue {{queue}}"}},
				},
				{
					title: "Interrupts and packets per interrupt per RX queue",
					description: "Interrupts/s of each RX queue's MSI-X vector (/proc/interrupts) and the queue's packets per interrupt: what coalescing buys. " +
						"The paper's mlx5 runs (mlx5, XDP_DROP): about 245,000 interrupts/s per CPU at 12.4 Mpps, some 50 packets per interrupt.",
					unit: "ops", min: &f0, exempt: exemptIRQ,
					targets: []target{
						{refID: "A", expr: recDev(rec.queueInterrupts()), legend: "{{device}} queue {{queue}} interrupts/s"},
						{refID: "B", expr: recDev(rec.packetsPerInterrupt()), legend: "{{device}} queue {{queue}} packets per interrupt"},
					},
				},
				{
					title:       "Page cache and page_pool: empty vs reuse",
					description: "mlx5 RX page cache events (reuse = recycled page, empty = fell back to the page allocator) and page_pool allocations by path (fast vs slow).",
					unit:        "ops", min: &f0, exempt: exemptPage,
					targets: []target{
						{refID: "A", expr: sumBy("device, event", "xdp_nic_rx_page_cache_events_total", selInstDev), legend: "{{device}} cache {{event}}"},
						{refID: "B", expr: sumBy("device, path", "xdp_nic_rx_page_pool_allocations_total", selInstDev), legend: "{{device}} page_pool {{path}}"},
					},
				},
				{
					title:       "CQE compression",
					description: "Share of the port's received packets that came through compressed completion entries (rx_cqe_compress_pkts / port packets) and packets per compressed block. Compression saves PCIe transactions.",
					unit:        "short", min: &f0, exempt: exemptCQE,
					targets: []target{
						{refID: "A", expr: recDev(rec.cqePackets()) + " / " + recDev(rec.portRx()), legend: "{{device}} compressed share"},
						{refID: "B", expr: recDev(rec.cqePackets()) + " / " + recDev(rec.cqeBlocks()), legend: "{{device}} packets per block"},
					},
				},
				{
					runbook:     AlertPCIeStalled,
					title:       "PCIe outbound stalls",
					description: "Share of the last second the NIC could not issue PCIe reads/writes for lack of credits (outbound_pci_stalled_rd/wr), and seconds per second above 30% (the *_events counters).",
					unit:        "percentunit", min: &f0, exempt: exemptPCIe,
					targets: []target{
						{refID: "A", expr: "max by (device, op) (xdp_nic_pci_outbound_stalled_ratio{" + selInstDev + "})", legend: "{{device}} {{op}} stalled"},
						{refID: "B", expr: sumBy("device, op", "xdp_nic_pci_outbound_stalled_seconds_total", selInstDev), legend: "{{device}} {{op}} stalled seconds/s"},
					},
				},
				{
					title:       "Redirected into the device (ndo_xdp_xmit) and failures",
					description: "Frames other devices redirected into this one and it sent (ethtool tx*_xdp_xmit), and the ones it dropped.",
					unit:        "pps", min: &f0, needs: "XDP_REDIRECT into the device (--collector.rxq.action=redirect)",
					targets: []target{
						{refID: "A", expr: sumBy("device", "xdp_nic_xdp_xmit_packets_total", selInstDev), legend: "{{device}} sent"},
						{refID: "B", expr: sumBy("device, reason", "xdp_nic_xdp_xmit_failures_total", selInstDev), legend: "{{device}} failed {{reason}}"},
					},
				},
			}},
			{title: "BPF programs on the device (bpftool prog, bpftool net)", tool: "bpftool prog show, bpftool net show", panels: []panel{
				{
					title: "Time per run of each program: XDP and the tc path",
					description: "ns per run of each program on the device, from the kernel's own run count and run time: its XDP program, and its tc (cls_bpf), tcx and netkit programs, " +
						"which run on the packets XDP passes to the stack (ingress) and on what the stack sends (egress). The kernel counts only while BPF statistics are on " +
						"(--collector.bpf.enable-stats or kernel.bpf_stats_enabled=1); a program on several devices has one count for all of them.",
					unit: "ns", min: &f0, needs: "BPF statistics on (--collector.bpf.enable-stats)",
					targets: []target{
						{refID: "A", expr: perProgram("xdp_bpf_prog_info", "1e9 * "+rec.progRunTime()+"{"+selInst+"}"), legend: "{{device}} XDP ({{attach_mode}}) {{name}}"},
						{refID: "B", expr: perProgram("xdp_bpf_tc_prog_info", "1e9 * "+rec.progRunTime()+"{"+selInst+"}"), legend: "{{device}} {{kind}} {{hook}} {{name}}",
							needs: "a tc, tcx or netkit program on the device and BPF statistics on"},
					},
				},
				{
					title: "CPU time in each program: XDP and the tc path",
					description: "Seconds per second each program on the device ran (1 is one CPU busy), XDP beside tc, tcx and netkit: where the packets that take the slow path spend their time. " +
						"Counted only while BPF statistics are on; a program on several devices has one count for all of them.",
					unit: "percentunit", min: &f0, needs: "BPF statistics on (--collector.bpf.enable-stats)",
					targets: []target{
						{refID: "A", expr: perProgram("xdp_bpf_prog_info", progRate("xdp_bpf_prog_run_seconds_total")), legend: "{{device}} XDP ({{attach_mode}}) {{name}}"},
						{refID: "B", expr: perProgram("xdp_bpf_tc_prog_info", progRate("xdp_bpf_prog_run_seconds_total")), legend: "{{device}} {{kind}} {{hook}} {{name}}",
							needs: "a tc, tcx or netkit program on the device and BPF statistics on"},
					},
				},
			}},
		},
	}
}

// progRate is a per-program counter's rate on the selected instance.
func progRate(counter string) string { return rate(counter, selInst) }

// perProgram gives each attachment of info (a program on a hook of a
// selected device) its program's value: info is the many side, so a
// program attached to several devices is drawn on each.
func perProgram(info, value string) string {
	return info + "{" + selInstDev + "}\n* on (cluster, job, instance, prog_id) group_left ()\n(" + value + ")"
}
