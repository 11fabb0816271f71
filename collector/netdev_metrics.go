package collector

import (
	"strings"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
)

var (
	// netdevQstatsDevice[i] and netdevQstatsQueue[i] carry netdev.QstatNames[i].
	netdevQstatsDevice [len(netdev.QstatNames)]*Family
	netdevQstatsQueue  [len(netdev.QstatNames)]*Family
	// netdevPagePoolStats[i] carries netdev.PagePoolStatNames[i].
	netdevPagePoolStats [len(netdev.PagePoolStatNames)]*Family

	netdevXDPFeature = newFamily("netdev", "netdev_xdp_feature",
		"1 if the device supports the XDP feature (netdev netlink dev-get xdp-features, enum xdp-act: basic, redirect, ndo-xmit, xsk-zerocopy, hw-offload, rx-sg, ndo-xmit-sg).",
		Gauge, "device", "feature")
	netdevXDPRxMetadataFeature = newFamily("netdev", "netdev_xdp_rx_metadata_feature",
		"1 if the device exposes the XDP RX metadata kfunc (netdev netlink dev-get xdp-rx-metadata-features: timestamp, hash, vlan-tag).",
		Gauge, "device", "feature")
	netdevXSKFeature = newFamily("netdev", "netdev_xsk_feature",
		"1 if the driver supports the AF_XDP TX metadata feature (netdev netlink dev-get xsk-features: tx-timestamp, tx-checksum, tx-launch-time-fifo).",
		Gauge, "device", "feature")
	netdevXDPZCMaxSegs = newFamily("netdev", "netdev_xdp_zc_max_segments",
		"Maximum fragments per frame in AF_XDP zero-copy mode (netdev netlink dev-get xdp-zc-max-segs).",
		Gauge, "device")
	netdevQueueInfo = newFamily("netdev", "netdev_queue_info",
		"A configured queue with the NAPI instance that services it, that NAPI's IRQ and the CPUs the IRQ may run on (/proc/irq/N/smp_affinity_list) and does run on (effective_affinity_list); from netdev netlink queue-get and napi-get. Empty when the driver reports none (veth has NAPI but no IRQ).",
		Gauge, "device", "queue", "type", "napi_id", "irq", "cpus", "effective_cpus")
	netdevNapiInfo = newFamily("netdev", "netdev_napi_info",
		"A NAPI instance of the device with its IRQ and, in threaded mode, the PID of its kernel thread (netdev netlink napi-get). Lists NAPIs even when the driver does not link them to queues (veth).",
		Gauge, "device", "napi_id", "irq", "pid")
	netdevNapiDeferHardIRQs = newFamily("netdev", "netdev_napi_defer_hard_irqs",
		"Consecutive empty polls before the NAPI re-enables hardware IRQs (netdev netlink napi-get defer-hard-irqs).",
		Gauge, "device", "napi_id")
	netdevNapiGROFlushTimeout = newFamily("netdev", "netdev_napi_gro_flush_timeout_seconds",
		"NAPI watchdog timeout that also delays GRO flushes (netdev netlink napi-get gro-flush-timeout).",
		Gauge, "device", "napi_id")
	netdevPagePoolInflight = newFamily("netdev", "netdev_page_pool_inflight_pages",
		"Pages allocated from the page pool and not yet returned (netdev netlink page-pool-get inflight).",
		Gauge, "device", "pool_id", "napi_id")
	netdevPagePoolInflightMem = newFamily("netdev", "netdev_page_pool_inflight_bytes",
		"Memory held by the page pool's in-flight pages (netdev netlink page-pool-get inflight-mem).",
		Gauge, "device", "pool_id", "napi_id")
	netdevPagePoolDetached = newFamily("netdev", "netdev_page_pool_detached",
		"1 once the driver has detached the page pool and it only waits for its in-flight pages to come back; a detached pool that stays is a page leak (netdev netlink page-pool-get detach-time).",
		Gauge, "device", "pool_id", "napi_id")
)

// metricStem turns a spec attribute name into a metric name part.
func metricStem(attr string) string { return strings.ReplaceAll(attr, "-", "_") }

func init() {
	for i, attr := range netdev.QstatNames {
		netdevQstatsDevice[i] = newFamily("netdev", "netdev_qstats_"+metricStem(attr)+"_total",
			"Device total of "+netdev.QstatDocs[i]+" (netdev netlink qstats-get "+attr+", device scope: includes the driver's base stats of queues since removed, so it survives queue reconfiguration).",
			Counter, "device")
		netdevQstatsQueue[i] = newFamily("netdev", "netdev_queue_"+metricStem(attr)+"_total",
			"Per-queue "+netdev.QstatDocs[i]+" (netdev netlink qstats-get "+attr+", scope queue: may restart from 0 when the queue is reconfigured).",
			Counter, "device", "queue", "type")
	}
	for i, attr := range netdev.PagePoolStatNames {
		netdevPagePoolStats[i] = newFamily("netdev", "netdev_page_pool_"+metricStem(attr)+"_total",
			"Page pool "+netdev.PagePoolStatDocs[i]+" (netdev netlink page-pool-stats-get "+attr+", needs CONFIG_PAGE_POOL_STATS).",
			Counter, "device", "pool_id", "napi_id")
	}
}
