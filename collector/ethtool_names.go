package collector

// curatedStat says which curated family a stat feeds and with which extra
// label value (action, event, direction...), if the family has one.
type curatedStat struct {
	fam   *Family
	extra string
	// scale converts the driver's unit to the family's (percent -> ratio).
	scale float64
}

// Families with a queue label are fed by per-queue stats; when a driver
// only reports the device-wide sum (veth's page_pool stats, for example)
// that sum is used with an empty queue label instead. A device never has
// both, so summing a family over queue never double-counts.
var (
	ethtoolDriverInfoFam = newFamily("nic", "nic_driver_info",
		"Driver of the interface, from ETHTOOL_GDRVINFO (ethtool -i); always 1.", Gauge,
		"device", "driver", "version", "firmware_version", "bus_info")
	ethtoolChannels = newFamily("nic", "nic_channels",
		"Channels (queues) the interface uses now, by type (rx, tx, other, combined), from ETHTOOL_GCHANNELS (ethtool -l).", Gauge,
		"device", "channel")
	ethtoolChannelsMax = newFamily("nic", "nic_channels_max",
		"Most channels the interface supports, by type, from ETHTOOL_GCHANNELS (ethtool -l, pre-set maximums).", Gauge,
		"device", "channel")
	ethtoolRing = newFamily("nic", "nic_ring_descriptors",
		"Descriptors in each RX and TX ring, from ETHTOOL_GRINGPARAM (ethtool -g).", Gauge,
		"device", "ring").documented("Descriptors in each RX and TX ring now, from ETHTOOL_GRINGPARAM (ethtool -g). Larger RX rings can overflow DDIO (LLC) capacity.")
	ethtoolRingMax = newFamily("nic", "nic_ring_descriptors_max",
		"Largest RX and TX ring the interface supports, from ETHTOOL_GRINGPARAM (ethtool -g, pre-set maximums).", Gauge,
		"device", "ring")
	ethtoolPrivFlag = newFamily("nic", "nic_private_flag_enabled",
		"1 if the driver's private flag is on, from ETHTOOL_GPFLAGS.", Gauge,
		"device", "flag").documented("1 if the driver private flag (ethtool --show-priv-flags, e.g. mlx5 rx_cqe_compress, rx_striding_rq) is on, 0 if off.")

	ethtoolPhyRxSize = newFamily("nic", "nic_phy_rx_packets_by_size_total",
		"Frames the PHY received by size range, from ethtool -S rx_*_to_*_bytes_phy.", Counter,
		"device", "size").documented("Packets received at the physical port by frame size in bytes, e.g. size=\"64\" or \"65_to_127\" (ethtool -S rx_64_bytes_phy, rx_65_to_127_bytes_phy, ...; mlx5).")
	ethtoolPageCache = newFamily("nic", "nic_rx_page_cache_events_total",
		"RX page cache events per queue (reuse, full, empty, busy, waive), from mlx5 ethtool -S rx*_cache_*.", Counter,
		"device", "queue", "event").documented("mlx5 RX page cache events per queue: reuse, full, empty, busy, waive (ethtool -S rx<N>_cache_reuse, _full, _empty, _busy, _waive).")
	ethtoolPagePoolAlloc = newFamily("nic", "nic_rx_page_pool_allocations_total",
		"Page pool allocations per queue by path, from the driver's ethtool -S rx*_pp_alloc_*.", Counter,
		"device", "queue", "path").documented("page_pool allocations per queue by path: fast, slow, slow_high_order, empty, refill, waive (ethtool -S rx<N>_pp_alloc_*, or device-wide rx_pp_alloc_*).")
	ethtoolPagePoolRecycle = newFamily("nic", "nic_rx_page_pool_recycles_total",
		"Page pool recycles per queue by result, from the driver's ethtool -S rx*_pp_recycle_*.", Counter,
		"device", "queue", "result").documented("page_pool recycling per queue by result: cached, cache_full, ring, ring_full, released_ref (ethtool -S rx<N>_pp_recycle_*, or device-wide rx_pp_recycle_*).")
	ethtoolCQEPackets = newFamily("nic", "nic_rx_cqe_compressed_packets_total",
		"Packets received through compressed completion queue entries, from mlx5 ethtool -S rx*_cqe_compress_pkts.", Counter,
		"device", "queue").documented("Packets received through compressed completion queue entries (ethtool -S rx<N>_cqe_compress_pkts; mlx5 with rx_cqe_compress on).")
	ethtoolCQEBlocks = newFamily("nic", "nic_rx_cqe_compressed_blocks_total",
		"Compressed completion queue entry blocks received (ethtool -S rx<N>_cqe_compress_blks; mlx5).", Counter,
		"device", "queue")
	ethtoolRxQueuePackets = newFamily("nic", "nic_rx_queue_packets_total",
		"Packets the NIC delivered to each RX queue as the driver counts them, from ethtool -S.", Counter,
		"device", "queue").documented("Packets the NIC delivered to each RX queue, as the driver counts them: the RSS spread at no cost on the packet path " +
		"(ethtool -S mlx5 rx<N>_packets, ice/ixgbe/virtio_net rx_queue_<N>_packets, i40e rx-<N>.packets, ena queue_<N>_rx_cnt).")
	ethtoolRxXDP = newFamily("nic", "nic_rx_xdp_packets_total",
		"Packets per RX queue by the XDP verdict the driver counted, from ethtool -S.", Counter,
		"device", "queue", "action").documented("Packets per RX queue by the XDP verdict the driver counted: drop, redirect, tx, pass, aborted (ethtool -S mlx5 rx<N>_xdp_drop/_redirect/_tx_xmit, veth/virtio_net rx_queue_<N>_xdp_drops/_redirect(s)/_tx, ena queue_<N>_rx_xdp_*).")
	ethtoolRxXDPProcessedPackets = newFamily("nic", "nic_rx_xdp_processed_packets_total",
		"Packets an XDP program ran on, per RX queue (ethtool -S veth/virtio_net rx_queue_<N>_xdp_packets).", Counter,
		"device", "queue")
	ethtoolRxXDPProcessedBytes = newFamily("nic", "nic_rx_xdp_processed_bytes_total",
		"Bytes an XDP program ran on, per RX queue (ethtool -S veth rx_queue_<N>_xdp_bytes).", Counter,
		"device", "queue")
	ethtoolRxXDPTxFail = newFamily("nic", "nic_rx_xdp_tx_failures_total",
		"XDP_TX frames the driver could not send back out, per RX queue and reason, from ethtool -S.", Counter,
		"device", "queue", "reason").documented("XDP_TX frames the driver could not send back out, per RX queue, by reason: full (send queue full), error (ethtool -S mlx5 rx<N>_xdp_tx_full/_err, veth rx_queue_<N>_xdp_tx_errors).")
	ethtoolXDPXmit = newFamily("nic", "nic_xdp_xmit_packets_total",
		"Frames redirected into the device by XDP (ndo_xdp_xmit) and sent, per queue, from ethtool -S.", Counter,
		"device", "queue").documented("Frames redirected into this device by XDP (ndo_xdp_xmit) and sent, per queue (ethtool -S mlx5 tx<N>_xdp_xmit, veth tx_queue_<N>_xdp_xmit, virtio_net tx_queue_<N>_xdp_tx).")
	ethtoolXDPXmitFail = newFamily("nic", "nic_xdp_xmit_failures_total",
		"Frames redirected into the device by XDP that it dropped, per queue and reason, from ethtool -S.", Counter,
		"device", "queue", "reason").documented("Frames redirected into this device by XDP that it dropped, per queue, by reason: full, error (ethtool -S mlx5 tx<N>_xdp_full/_err, veth tx_queue_<N>_xdp_xmit_errors, virtio_net tx_queue_<N>_xdp_tx_drops).")
	ethtoolPCIStalled = newFamily("nic", "nic_pci_outbound_stalled_ratio",
		"Share of the last second the NIC's PCIe reads or writes stalled, from mlx5 ethtool -S outbound_pci_stalled_*.", Gauge,
		"device", "op").documented("Share of the last second the NIC had outbound PCIe reads or writes it could not issue for lack of credits; the driver reports percent, this is 0..1 (ethtool -S outbound_pci_stalled_rd, outbound_pci_stalled_wr; mlx5).")
	ethtoolPCIStalledSeconds = newFamily("nic", "nic_pci_outbound_stalled_seconds_total",
		"Time the NIC's PCIe reads or writes stalled, from mlx5 ethtool -S outbound_pci_stalled_*_packets.", Counter,
		"device", "op").documented("Seconds in which outbound PCIe reads or writes were stalled more than 30% of the time (ethtool -S outbound_pci_stalled_rd_events, outbound_pci_stalled_wr_events; mlx5).")

	ethtoolStat = newFamily("nic", "nic_stat_<stat>",
		"A device-wide ethtool -S stat no typed family carries, its name sanitised.", Untyped,
		"device").documented("Any other device-wide ethtool -S stat, its name sanitised (lower case, [a-z0-9_]). Selected as any family, by its name stat_<stat>.")
	ethtoolQueueStat = newFamily("nic", "nic_queue_stat_<stat>",
		"A per-queue ethtool -S stat no typed family carries, the queue number moved to the queue label.", Untyped,
		"device", "queue").documented("Any other per-queue ethtool -S stat with the queue number moved to the queue label (rx3_packets, rx_queue_3_packets, rx-3.packets, [3]: rx_packets, queue_3_rx_packets -> queue_stat_rx_packets{queue=\"3\"}). Selected as any family, by its name queue_stat_<stat>.")
)

// perQueueCurated maps a per-queue stat's base name (see parseQueue) to its
// curated family. A device-wide stat of the same name feeds the family only
// when the device has no per-queue form of it.
var perQueueCurated = map[string]curatedStat{
	"rx_cache_reuse": {ethtoolPageCache, "reuse", 1},
	"rx_cache_full":  {ethtoolPageCache, "full", 1},
	"rx_cache_empty": {ethtoolPageCache, "empty", 1},
	"rx_cache_busy":  {ethtoolPageCache, "busy", 1},
	"rx_cache_waive": {ethtoolPageCache, "waive", 1},

	"rx_pp_alloc_fast":            {ethtoolPagePoolAlloc, "fast", 1},
	"rx_pp_alloc_slow":            {ethtoolPagePoolAlloc, "slow", 1},
	"rx_pp_alloc_slow_high_order": {ethtoolPagePoolAlloc, "slow_high_order", 1},
	"rx_pp_alloc_empty":           {ethtoolPagePoolAlloc, "empty", 1},
	"rx_pp_alloc_refill":          {ethtoolPagePoolAlloc, "refill", 1},
	"rx_pp_alloc_waive":           {ethtoolPagePoolAlloc, "waive", 1},
	"rx_pp_recycle_cached":        {ethtoolPagePoolRecycle, "cached", 1},
	"rx_pp_recycle_cache_full":    {ethtoolPagePoolRecycle, "cache_full", 1},
	"rx_pp_recycle_ring":          {ethtoolPagePoolRecycle, "ring", 1},
	"rx_pp_recycle_ring_full":     {ethtoolPagePoolRecycle, "ring_full", 1},
	"rx_pp_recycle_released_ref":  {ethtoolPagePoolRecycle, "released_ref", 1},

	"rx_packets": {ethtoolRxQueuePackets, "", 1},
	"rx_cnt":     {ethtoolRxQueuePackets, "", 1}, // ena

	"rx_cqe_compress_pkts": {ethtoolCQEPackets, "", 1},
	"rx_cqe_compress_blks": {ethtoolCQEBlocks, "", 1},

	// mlx5 and ena
	"rx_xdp_drop":     {ethtoolRxXDP, "drop", 1},
	"rx_xdp_redirect": {ethtoolRxXDP, "redirect", 1}, // also veth
	"rx_xdp_tx_xmit":  {ethtoolRxXDP, "tx", 1},
	"rx_xdp_pass":     {ethtoolRxXDP, "pass", 1},
	"rx_xdp_aborted":  {ethtoolRxXDP, "aborted", 1},
	// veth and virtio_net
	"rx_xdp_drops":     {ethtoolRxXDP, "drop", 1},
	"rx_xdp_redirects": {ethtoolRxXDP, "redirect", 1},
	"rx_xdp_tx":        {ethtoolRxXDP, "tx", 1}, // also ena
	"rx_xdp_packets":   {ethtoolRxXDPProcessedPackets, "", 1},
	"rx_xdp_bytes":     {ethtoolRxXDPProcessedBytes, "", 1},

	"rx_xdp_tx_full":   {ethtoolRxXDPTxFail, "full", 1},
	"rx_xdp_tx_err":    {ethtoolRxXDPTxFail, "error", 1},
	"rx_xdp_tx_errors": {ethtoolRxXDPTxFail, "error", 1},

	"tx_xdp_xmit":        {ethtoolXDPXmit, "", 1},
	"tx_xdp_tx":          {ethtoolXDPXmit, "", 1},
	"tx_xdp_full":        {ethtoolXDPXmitFail, "full", 1},
	"tx_xdp_err":         {ethtoolXDPXmitFail, "error", 1},
	"tx_xdp_xmit_errors": {ethtoolXDPXmitFail, "error", 1},
	"tx_xdp_tx_drops":    {ethtoolXDPXmitFail, "error", 1},
}

// deviceCurated maps device-wide stats to their curated family: mlx5's
// PCIe counters (en_stats.c pcie_perf_stats_desc), a signal no other
// driver names.
var deviceCurated = map[string]curatedStat{
	"outbound_pci_stalled_rd":        {ethtoolPCIStalled, "read", 0.01},
	"outbound_pci_stalled_wr":        {ethtoolPCIStalled, "write", 0.01},
	"outbound_pci_stalled_rd_events": {ethtoolPCIStalledSeconds, "read", 1},
	"outbound_pci_stalled_wr_events": {ethtoolPCIStalledSeconds, "write", 1},
}
