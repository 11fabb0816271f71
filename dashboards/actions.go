package dashboards

// actions is each alert's first step, the "Act" of its runbook section in
// one line: what a notification puts under the measured figures, so the
// person it reaches knows which fix to try before opening the runbook.
var actions = map[string]string{
	AlertExporterDown:          "Check the exporter process and its log, then that Prometheus reaches HOST:9739/metrics with the job's name.",
	AlertNICDropsWhileIdle:     "Cut PCIe transactions per packet (ethtool --set-priv-flags DEV rx_cqe_compress on), check the slot's width and speed and the NUMA node; more CPUs do not help.",
	AlertRxOutOfBuffer:         "Busy RX CPUs: add queues or make the program cheaper; idle ones: check page recycling and the egress device's TX completion.",
	AlertPageCacheStarved:      "Make pages return to the RX CPU's cache faster: TX completion of the egress device, ring sizes, the page_pool's recycling.",
	AlertPCIeStalled:           "Cut PCIe transactions per packet (CQE compression, striding RQ per the driver), check the slot's width and speed and the NUMA node.",
	AlertDDIOCacheMiss:         "Shrink the RX rings (ethtool -G DEV rx 512) or use fewer queues per NIC until the miss ratio falls.",
	AlertDDIOWriteMiss:         "Shrink the RX rings (ethtool -G DEV rx 512) or use fewer queues per NIC, and keep the RX CPUs on the NIC's socket.",
	AlertRSSImbalance:          "Check the RSS table (ethtool -x DEV; spread it with ethtool -X DEV equal N) and the flows' hash fields (ethtool -N).",
	AlertRXQueuesShareCPU:      "Spread the busy queues' IRQs over CPUs (/proc/irq/N/smp_affinity_list) or fix the RPS masks that steer them together.",
	AlertExceptions:            "The action label says who: aborted is the program's error path; tx or redirect is the driver's full or missing TX queue.",
	AlertRedirectErrors:        "Map the errno: ENETDOWN target down, ENXIO/EINVAL empty slot or target without XDP, EOPNOTSUPP no ndo_xdp_xmit, ENOSPC full.",
	AlertDevmapDrops:           "Check the egress device's TX ring size, its completion (interrupt moderation) and its XDP TX queues per CPU.",
	AlertCpumapDrops:           "Spread over more target CPUs, raise the cpumap entry's qsize, keep other work off the target CPUs.",
	AlertNAPIOverload:          "Add RX queues and CPUs or lower the per-packet cost; check net.core.netdev_budget and consider threaded NAPI.",
	AlertProgramNotRunning:     "Check that the program is attached to the device that receives, in the mode that sees the traffic (xdp_bpf_prog_info).",
	AlertCollectorFailing:      "Read the exporter's log on the host: it names the capability, kernel feature or flag the collector lacks.",
	AlertStackDrops:            "Backlog drops: raise netdev_max_backlog or spread the load; socket drops: the receiving application; NO_SOCKET: find the sender.",
	AlertPCIeLinkDegraded:      "Compare LnkCap with LnkSta (lspci -vv -s ADDR): reseat the card or move it to a slot wired for its width and speed.",
	AlertPCIeAERUncorr:         "Read the AER report in dmesg; repeated errors mean the card, slot, riser or firmware: update, move or replace it.",
	AlertPCIeAERCorr:           "Reseat or move the card and check the riser and slot; lspci -vv shows the link's state and error status bits.",
	AlertRemoteNUMA:            "Pin the RX queues' IRQs to CPUs of the NIC's NUMA node (/proc/irq/N/smp_affinity_list) or move the NIC to that node.",
	AlertPCIeBusy:              "Small packets: turn on CQE compression and check the link's width and speed; large packets: spread over more NICs.",
	AlertGenericMode:           "Attach in native mode (ip link set dev DEV xdpdrv, xdp-loader load -m native); the loader's error says why it cannot.",
	AlertRedirectTargetQueues:  "Give the target a channel per CPU (ethtool -L DEV combined N) or keep the redirecting queues' IRQs on low CPUs.",
	AlertPauseWhileDropping:    "Act on the drop alert beside it: the pause frames and the drops share one cause, a host that does not drain the port.",
	AlertRedirectNoNdoXmit:     "Redirect into a driver with ndo_xdp_xmit, or attach an XDP program to the veth peer that receives the frames.",
	AlertRecordingRulesMissing: "Load recording.yml beside alerts.yml from the same release into this Prometheus, then reload it.",
	AlertFleetHostDrops:        "Follow XDPNICDropsWhileRXCPUsIdle on that host from its edge Prometheus; compare its link, firmware and rings with a healthy host.",
	AlertFleetWideDrops:        "Find what changed fleet-wide when it started: a deployment, a kernel or driver update, a traffic event upstream.",
	AlertFleetCollectorFailing: "Read the exporter's log on one of the hosts, then roll back or fix the change they share (release, kernel, flag).",
	AlertFleetHostSilent:       "Check the host's edge Prometheus and its remote write (prometheus_remote_storage_samples_failed_total).",
}
