package collector

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"
)

// The "netdev" generic netlink family. No Go library implements it, so the
// command numbers, attribute ids and enums below are transcribed by hand from
// the kernel's YNL spec, Documentation/netlink/specs/netdev.yaml (and the
// uapi header generated from it, include/uapi/linux/netdev.h). The kernel
// only ever appends to these enums, so the values are stable; attributes
// added by newer kernels are skipped by the decoders.
const netdevFamilyName = "netdev"

// Commands (enum netdev_cmd; spec "operations").
const (
	netdevCmdDevGet           = 1  // NETDEV_CMD_DEV_GET, Linux 6.3
	netdevCmdPagePoolGet      = 5  // NETDEV_CMD_PAGE_POOL_GET, Linux 6.8
	netdevCmdPagePoolStatsGet = 9  // NETDEV_CMD_PAGE_POOL_STATS_GET, Linux 6.8, CONFIG_PAGE_POOL_STATS
	netdevCmdQueueGet         = 10 // NETDEV_CMD_QUEUE_GET, Linux 6.8
	netdevCmdNapiGet          = 11 // NETDEV_CMD_NAPI_GET, Linux 6.8
	netdevCmdQstatsGet        = 12 // NETDEV_CMD_QSTATS_GET, Linux 6.9
)

// Attribute set "dev".
const (
	netdevADevIfindex               = 1 // u32
	netdevADevXDPFeatures           = 3 // u64, enum xdp-act
	netdevADevXDPZCMaxSegs          = 4 // u32
	netdevADevXDPRxMetadataFeatures = 5 // u64, enum xdp-rx-metadata
	netdevADevXSKFeatures           = 6 // u64, enum xsk-flags
)

// Attribute set "page-pool".
const (
	netdevAPagePoolID          = 1 // uint
	netdevAPagePoolIfindex     = 2 // u32, absent once the netdev is gone
	netdevAPagePoolNapiID      = 3 // uint
	netdevAPagePoolInflight    = 4 // uint, pages
	netdevAPagePoolInflightMem = 5 // uint, bytes
	netdevAPagePoolDetachTime  = 6 // uint, present once the driver detached the pool
)

// Attribute set "page-pool-stats". Ids 2..7 are reserved by the spec.
const (
	netdevAPagePoolStatsInfo                  = 1 // nest, page-pool-info (id, ifindex)
	netdevAPagePoolStatsAllocFast             = 8
	netdevAPagePoolStatsRecycleReleasedRefcnt = 18
)

// Attribute set "napi".
const (
	netdevANapiIfindex         = 1 // u32
	netdevANapiID              = 2 // u32
	netdevANapiIRQ             = 3 // u32
	netdevANapiPID             = 4 // u32, threaded NAPI only
	netdevANapiDeferHardIRQs   = 5 // u32
	netdevANapiGROFlushTimeout = 6 // uint, nanoseconds
)

// Attribute set "queue".
const (
	netdevAQueueID      = 1 // u32
	netdevAQueueIfindex = 2 // u32
	netdevAQueueType    = 3 // u32, enum queue-type
	netdevAQueueNapiID  = 4 // u32
)

// Attribute set "qstats". Ids 5..7 are reserved by the spec; every
// statistic from 8 on is a uint counter.
const (
	netdevAQstatsIfindex   = 1 // u32
	netdevAQstatsQueueType = 2 // u32, enum queue-type
	netdevAQstatsQueueID   = 3 // u32
	netdevAQstatsScope     = 4 // uint, enum qstats-scope
	netdevQstatsScopeQueue = 1 // NETDEV_QSTATS_SCOPE_QUEUE
	netdevAQstatsFirstStat = 8 // NETDEV_A_QSTATS_RX_PACKETS
)

// netdevQueueTypes is enum queue-type.
var netdevQueueTypes = []string{"rx", "tx"}

func queueTypeName(t uint32) string {
	if int(t) < len(netdevQueueTypes) {
		return netdevQueueTypes[t]
	}
	return fmt.Sprint(t)
}

// netdevQstatNames are the qstats attributes from NETDEV_A_QSTATS_RX_PACKETS
// (8) on, in spec order: name i has attribute id 8+i.
var netdevQstatNames = [...]string{
	"rx-packets", "rx-bytes", "tx-packets", "tx-bytes",
	"rx-alloc-fail", "rx-hw-drops", "rx-hw-drop-overruns",
	"rx-csum-complete", "rx-csum-unnecessary", "rx-csum-none", "rx-csum-bad",
	"rx-hw-gro-packets", "rx-hw-gro-bytes", "rx-hw-gro-wire-packets", "rx-hw-gro-wire-bytes",
	"rx-hw-drop-ratelimits",
	"tx-hw-drops", "tx-hw-drop-errors", "tx-csum-none", "tx-needs-csum",
	"tx-hw-gso-packets", "tx-hw-gso-bytes", "tx-hw-gso-wire-packets", "tx-hw-gso-wire-bytes",
	"tx-hw-drop-ratelimits", "tx-stop", "tx-wake",
}

// netdevPagePoolStatNames are page-pool-stats attributes 8..18 in spec order.
var netdevPagePoolStatNames = [...]string{
	"alloc-fast", "alloc-slow", "alloc-slow-high-order", "alloc-empty", "alloc-refill", "alloc-waive",
	"recycle-cached", "recycle-cache-full", "recycle-ring", "recycle-ring-full", "recycle-released-refcnt",
}

// The three flag sets of dev-get, bit i named by entry i.
var (
	netdevXDPActNames        = []string{"basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"}
	netdevXDPRxMetadataNames = []string{"timestamp", "hash", "vlan-tag"}
	netdevXSKFlagNames       = []string{"tx-timestamp", "tx-checksum", "tx-launch-time-fifo"}
)

// decodeUint reads the spec's variable-width "uint" type: the kernel's
// nla_put_uint writes 4 bytes when the value fits and 8 otherwise.
func decodeUint(b []byte) (uint64, error) {
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b)), nil
	case 8:
		return binary.NativeEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("uint attribute of %d bytes, want 4 or 8", len(b))
}

// adUint reads the current attribute as a spec "uint".
func adUint(ad *netlink.AttributeDecoder) uint64 {
	var v uint64
	ad.Do(func(b []byte) error {
		var err error
		v, err = decodeUint(b)
		return err
	})
	return v
}

// decodeEach runs fn over the attributes of every message, stopping at the
// first malformed one.
func decodeEach(msgs []genetlink.Message, what string, fn func(ad *netlink.AttributeDecoder) error) error {
	for i, m := range msgs {
		if err := decodeAttrs(m.Data, fn); err != nil {
			return fmt.Errorf("%s message %d: %w", what, i, err)
		}
	}
	return nil
}

// decodeAttrs walks the netlink attributes in b with fn, and fails with
// the first error fn or the decoder met: every reply of every family the
// collectors read (rtnetlink, generic netlink, sock_diag) ends in them.
func decodeAttrs(b []byte, fn func(ad *netlink.AttributeDecoder) error) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	if err := fn(ad); err != nil {
		return err
	}
	return ad.Err()
}

// netdevQstats is one qstats-get reply, per queue or (perQueue false) per
// device.
type netdevQstats struct {
	ifindex   uint32
	queueType uint32
	queueID   uint32
	perQueue  bool
	present   [len(netdevQstatNames)]bool
	values    [len(netdevQstatNames)]uint64
}

func decodeQstats(msgs []genetlink.Message) ([]netdevQstats, error) {
	out := make([]netdevQstats, 0, len(msgs))
	err := decodeEach(msgs, "qstats-get", func(ad *netlink.AttributeDecoder) error {
		var s netdevQstats
		for ad.Next() {
			switch t := ad.Type(); {
			case t == netdevAQstatsIfindex:
				s.ifindex = ad.Uint32()
			case t == netdevAQstatsQueueType:
				s.queueType = ad.Uint32()
				s.perQueue = true
			case t == netdevAQstatsQueueID:
				s.queueID = ad.Uint32()
				s.perQueue = true
			case t >= netdevAQstatsFirstStat && int(t-netdevAQstatsFirstStat) < len(s.values):
				i := t - netdevAQstatsFirstStat
				s.values[i] = adUint(ad)
				s.present[i] = true
			}
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// netdevDev is one dev-get reply.
type netdevDev struct {
	ifindex          uint32
	xdpFeatures      uint64
	xdpZCMaxSegs     uint32
	hasZCMaxSegs     bool
	xdpRxMetadata    uint64
	xskFeatures      uint64
	hasXSKFeatures   bool
	hasRxMetadataSet bool
}

func decodeDevs(msgs []genetlink.Message) ([]netdevDev, error) {
	out := make([]netdevDev, 0, len(msgs))
	err := decodeEach(msgs, "dev-get", func(ad *netlink.AttributeDecoder) error {
		var d netdevDev
		for ad.Next() {
			switch ad.Type() {
			case netdevADevIfindex:
				d.ifindex = ad.Uint32()
			case netdevADevXDPFeatures:
				d.xdpFeatures = ad.Uint64()
			case netdevADevXDPZCMaxSegs:
				d.xdpZCMaxSegs = ad.Uint32()
				d.hasZCMaxSegs = true
			case netdevADevXDPRxMetadataFeatures:
				d.xdpRxMetadata = ad.Uint64()
				d.hasRxMetadataSet = true
			case netdevADevXSKFeatures:
				d.xskFeatures = ad.Uint64()
				d.hasXSKFeatures = true
			}
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// netdevQueue is one queue-get reply.
type netdevQueue struct {
	ifindex   uint32
	id        uint32
	queueType uint32
	napiID    uint32
}

func decodeQueues(msgs []genetlink.Message) ([]netdevQueue, error) {
	out := make([]netdevQueue, 0, len(msgs))
	err := decodeEach(msgs, "queue-get", func(ad *netlink.AttributeDecoder) error {
		var q netdevQueue
		for ad.Next() {
			switch ad.Type() {
			case netdevAQueueID:
				q.id = ad.Uint32()
			case netdevAQueueIfindex:
				q.ifindex = ad.Uint32()
			case netdevAQueueType:
				q.queueType = ad.Uint32()
			case netdevAQueueNapiID:
				q.napiID = ad.Uint32()
			}
		}
		out = append(out, q)
		return nil
	})
	return out, err
}

// netdevNapi is one napi-get reply.
type netdevNapi struct {
	ifindex            uint32
	id                 uint32
	irq                uint32
	hasIRQ             bool
	pid                uint32
	deferHardIRQs      uint32
	hasDeferHardIRQs   bool
	groFlushTimeoutNs  uint64
	hasGROFlushTimeout bool
}

func decodeNapis(msgs []genetlink.Message) ([]netdevNapi, error) {
	out := make([]netdevNapi, 0, len(msgs))
	err := decodeEach(msgs, "napi-get", func(ad *netlink.AttributeDecoder) error {
		var n netdevNapi
		for ad.Next() {
			switch ad.Type() {
			case netdevANapiIfindex:
				n.ifindex = ad.Uint32()
			case netdevANapiID:
				n.id = ad.Uint32()
			case netdevANapiIRQ:
				n.irq = ad.Uint32()
				n.hasIRQ = true
			case netdevANapiPID:
				n.pid = ad.Uint32()
			case netdevANapiDeferHardIRQs:
				n.deferHardIRQs = ad.Uint32()
				n.hasDeferHardIRQs = true
			case netdevANapiGROFlushTimeout:
				n.groFlushTimeoutNs = adUint(ad)
				n.hasGROFlushTimeout = true
			}
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

// netdevPagePool is one page-pool-get reply.
type netdevPagePool struct {
	id          uint64
	ifindex     uint32
	napiID      uint64
	inflight    uint64
	inflightMem uint64
	detached    bool
}

func decodePagePools(msgs []genetlink.Message) ([]netdevPagePool, error) {
	out := make([]netdevPagePool, 0, len(msgs))
	err := decodeEach(msgs, "page-pool-get", func(ad *netlink.AttributeDecoder) error {
		var p netdevPagePool
		for ad.Next() {
			switch ad.Type() {
			case netdevAPagePoolID:
				p.id = adUint(ad)
			case netdevAPagePoolIfindex:
				p.ifindex = ad.Uint32()
			case netdevAPagePoolNapiID:
				p.napiID = adUint(ad)
			case netdevAPagePoolInflight:
				p.inflight = adUint(ad)
			case netdevAPagePoolInflightMem:
				p.inflightMem = adUint(ad)
			case netdevAPagePoolDetachTime:
				p.detached = true
			}
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// netdevPoolStats is one page-pool-stats-get reply.
type netdevPoolStats struct {
	id      uint64
	ifindex uint32
	present [len(netdevPagePoolStatNames)]bool
	values  [len(netdevPagePoolStatNames)]uint64
}

func decodePagePoolStats(msgs []genetlink.Message) ([]netdevPoolStats, error) {
	out := make([]netdevPoolStats, 0, len(msgs))
	err := decodeEach(msgs, "page-pool-stats-get", func(ad *netlink.AttributeDecoder) error {
		var s netdevPoolStats
		for ad.Next() {
			switch t := ad.Type(); {
			case t == netdevAPagePoolStatsInfo:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						switch nad.Type() {
						case netdevAPagePoolID:
							s.id = adUint(nad)
						case netdevAPagePoolIfindex:
							s.ifindex = nad.Uint32()
						}
					}
					return nil
				})
			case t >= netdevAPagePoolStatsAllocFast && t <= netdevAPagePoolStatsRecycleReleasedRefcnt:
				i := t - netdevAPagePoolStatsAllocFast
				s.values[i] = adUint(ad)
				s.present[i] = true
			}
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// netdevQueueKey is an RX queue of a device.
type netdevQueueKey struct{ ifindex, queue uint32 }

// rxQueueIRQs maps each RX queue that the kernel links to a NAPI instance
// with an IRQ to that IRQ (netdev queue-get and napi-get; the NAPI's IRQ
// since Linux 6.9, where the driver reports it).
func rxQueueIRQs(src netdevSource) (map[netdevQueueKey]uint32, error) {
	napiMsgs, err := src.dump(netdevCmdNapiGet, nil)
	if err != nil {
		return nil, err
	}
	napis, err := decodeNapis(napiMsgs)
	if err != nil {
		return nil, err
	}
	irqOf := map[uint32]uint32{}
	for _, n := range napis {
		if n.hasIRQ {
			irqOf[n.id] = n.irq
		}
	}
	queueMsgs, err := src.dump(netdevCmdQueueGet, nil)
	if err != nil {
		return nil, err
	}
	queues, err := decodeQueues(queueMsgs)
	out := map[netdevQueueKey]uint32{}
	for _, q := range queues {
		if irq, ok := irqOf[q.napiID]; ok && q.napiID != 0 && queueTypeName(q.queueType) == "rx" {
			out[netdevQueueKey{q.ifindex, q.id}] = irq
		}
	}
	return out, err
}
