package collector

import (
	"regexp"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
)

var (
	// netdevQstatsDevice[i] and netdevQstatsQueue[i] carry netdev.QstatNames[i].
	netdevQstatsDevice [len(netdev.QstatNames)]*Family
	netdevQstatsQueue  [len(netdev.QstatNames)]*Family
	// netdevPagePoolStats[i] is the family and label value that carry
	// netdev.PagePoolStatNames[i].
	netdevPagePoolStats [len(netdev.PagePoolStatNames)]pagePoolStat
	// The page pool counters in the nic collector's shape of them
	// (xdp_nic_rx_page_pool_*): allocations by path, recycles by result.
	netdevPagePoolAllocs, netdevPagePoolRecycles *Family

	netdevXDPFeature = newFamily("netdev", "netdev_xdp_feature",
		"1 if the device supports the XDP feature, from netdev netlink dev-get xdp-features.",
		Gauge, "device", "feature").documented("1 if the device supports the XDP feature (netdev netlink dev-get xdp-features, enum xdp-act: basic, redirect, ndo-xmit, xsk-zerocopy, hw-offload, rx-sg, ndo-xmit-sg).")
	netdevXDPRxMetadataFeature = newFamily("netdev", "netdev_xdp_rx_metadata_feature",
		"1 if the device has the XDP RX metadata kfunc, from netdev netlink dev-get xdp-rx-metadata-features.",
		Gauge, "device", "feature").documented("1 if the device exposes the XDP RX metadata kfunc (netdev netlink dev-get xdp-rx-metadata-features: timestamp, hash, vlan-tag).")
	netdevXSKFeature = newFamily("netdev", "netdev_xsk_feature",
		"1 if the driver has the AF_XDP TX metadata feature, from netdev netlink dev-get xsk-features.",
		Gauge, "device", "feature").documented("1 if the driver supports the AF_XDP TX metadata feature (netdev netlink dev-get xsk-features: tx-timestamp, tx-checksum, tx-launch-time-fifo).")
	netdevXDPZCMaxSegs = newFamily("netdev", "netdev_xdp_zc_max_segments",
		"Maximum fragments per frame in AF_XDP zero-copy mode (netdev netlink dev-get xdp-zc-max-segs).",
		Gauge, "device")
	netdevQueueInfo = newFamily("netdev", "netdev_queue_info",
		"A queue of the device with the NAPI and IRQ that service it, from netdev netlink queue-get and napi-get; always 1.",
		Gauge, "device", "queue", "direction", "napi_id", "irq").documented("A configured queue with the NAPI instance that services it and that NAPI's IRQ, from netdev netlink queue-get and napi-get; napi_id and irq absent where the driver reports none (veth has NAPI but no IRQ). xdp_netdev_irq_affinity_info says where the IRQ runs.")
	netdevIRQAffinity = newFamily("netdev", "netdev_irq_affinity_info",
		"The CPUs a queue IRQ of the device may run on and does run on, from /proc/irq/N; always 1.",
		Gauge, "device", "irq", "cpus", "effective_cpus").documented("The CPUs the IRQ of a NAPI instance of the device may run on (/proc/irq/N/smp_affinity_list) and does run on (effective_affinity_list), for the IRQs xdp_netdev_queue_info names; a label is absent where the file is missing. irqbalance or a user moving the IRQ changes this series, not the queue's: join on device and irq.")
	netdevNapiInfo = newFamily("netdev", "netdev_napi_info",
		"A NAPI instance of the device with its IRQ and kernel thread, from netdev netlink napi-get; always 1.",
		Gauge, "device", "napi_id", "irq", "pid").documented("A NAPI instance of the device with its IRQ and, in threaded mode, the PID of its kernel thread (netdev netlink napi-get). Lists NAPIs even when the driver does not link them to queues (veth).")
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
		"1 for a page pool the driver detached, which waits for its pages (netdev netlink page-pool-get detach-time).",
		Gauge, "device", "pool_id", "napi_id").documented("1 for a page pool the driver has detached and that only waits for its in-flight pages to come back; a detached pool that stays is a page leak (netdev netlink page-pool-get detach-time). A pool still attached has no series: one per pool would be one per RX queue of constant 0.")
)

// metricStem turns a spec attribute name into a metric name part.
func metricStem(attr string) string { return strings.ReplaceAll(attr, "-", "_") }

func init() {
	for i, attr := range netdev.QstatNames {
		what := helpClause(netdev.QstatDocs[i])
		netdevQstatsDevice[i] = newFamily("netdev", "netdev_qstats_"+metricStem(attr)+"_total",
			what+" per device (netdev qstats "+attr+").",
			Counter, "device").documented("Device total of " + netdev.QstatDocs[i] + " (netdev netlink qstats-get " + attr + ", device scope: includes the driver's base stats of queues since removed, so it survives queue reconfiguration).")
		netdevQstatsQueue[i] = newFamily("netdev", "netdev_queue_"+metricStem(attr)+"_total",
			what+" per queue (netdev qstats "+attr+").",
			Counter, "device", "queue", "direction").documented("Per-queue " + netdev.QstatDocs[i] + " (netdev netlink qstats-get " + attr + ", scope queue: may restart from 0 when the queue is reconfigured).")
	}
	var allocDoc, recycleDoc []string
	for i, attr := range netdev.PagePoolStatNames {
		kind, stat, _ := strings.Cut(attr, "-")
		value := metricStem(stat)
		if value == "released_refcnt" {
			value = "released_ref" // the name of the nic side, mlx5's rx_pp_recycle_released_ref
		}
		netdevPagePoolStats[i].value = value
		line := value + ": " + netdev.PagePoolStatDocs[i] + " (" + attr + ")"
		if kind == "alloc" {
			allocDoc = append(allocDoc, line)
		} else {
			recycleDoc = append(recycleDoc, line)
		}
	}
	netdevPagePoolAllocs = newFamily("netdev", "netdev_page_pool_allocations_total",
		"Page pool allocations by path, from netdev netlink page-pool-stats-get alloc-*.",
		Counter, "device", "pool_id", "napi_id", "path").documented("Page pool allocations by path, from netdev netlink page-pool-stats-get (needs CONFIG_PAGE_POOL_STATS); " + strings.Join(allocDoc, "; ") + ".")
	netdevPagePoolRecycles = newFamily("netdev", "netdev_page_pool_recycles_total",
		"Page pool recycles by result, from netdev netlink page-pool-stats-get recycle-*.",
		Counter, "device", "pool_id", "napi_id", "result").documented("Page pool recycles by result, from netdev netlink page-pool-stats-get (needs CONFIG_PAGE_POOL_STATS); " + strings.Join(recycleDoc, "; ") + ".")
	for i, attr := range netdev.PagePoolStatNames {
		netdevPagePoolStats[i].fam = netdevPagePoolRecycles
		if strings.HasPrefix(attr, "alloc-") {
			netdevPagePoolStats[i].fam = netdevPagePoolAllocs
		}
	}
}

// pagePoolStat is the series of one page-pool-stats-get attribute.
type pagePoolStat struct {
	fam   *Family
	value string // of the path or result label
}

// parenthetical is an aside of a netdev spec doc, which a HELP leaves to
// METRICS.md.
var parenthetical = regexp.MustCompile(` \([^)]*\)`)

// helpClause is a netdev spec doc as the start of a HELP sentence: its
// asides left out, its first letter upper case.
func helpClause(doc string) string {
	doc = parenthetical.ReplaceAllString(doc, "")
	return strings.ToUpper(doc[:1]) + doc[1:]
}
