// Package netdev reads the kernel's "netdev" generic netlink family
// (Documentation/netlink/specs/netdev.yaml): devices' XDP features,
// queues, NAPI instances, page pools and queue statistics, decoded into
// typed replies.
package netdev

import (
	"errors"
	"fmt"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/genl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

// The "netdev" generic netlink family. No Go library implements it, so the
// command numbers, attribute ids and enums below are transcribed by hand from
// the kernel's YNL spec, Documentation/netlink/specs/netdev.yaml (and the
// uapi header generated from it, include/uapi/linux/netdev.h). The kernel
// only ever appends to these enums, so the values are stable; attributes
// added by newer kernels are skipped by the decoders.
const FamilyName = "netdev"

// Commands (enum netdev_cmd; spec "operations").
const (
	CmdDevGet           = 1  // NETDEV_CMD_DEV_GET, Linux 6.3
	CmdPagePoolGet      = 5  // NETDEV_CMD_PAGE_POOL_GET, Linux 6.8
	CmdPagePoolStatsGet = 9  // NETDEV_CMD_PAGE_POOL_STATS_GET, Linux 6.8, CONFIG_PAGE_POOL_STATS
	CmdQueueGet         = 10 // NETDEV_CMD_QUEUE_GET, Linux 6.8
	CmdNapiGet          = 11 // NETDEV_CMD_NAPI_GET, Linux 6.8
	CmdQstatsGet        = 12 // NETDEV_CMD_QSTATS_GET, Linux 6.9
)

// Attribute set "dev".
const (
	ADevIfindex               = 1 // u32
	ADevXDPFeatures           = 3 // u64, enum xdp-act
	ADevXDPZCMaxSegs          = 4 // u32
	ADevXDPRxMetadataFeatures = 5 // u64, enum xdp-rx-metadata
	ADevXSKFeatures           = 6 // u64, enum xsk-flags
)

// Attribute set "page-pool".
const (
	APagePoolID          = 1 // uint
	APagePoolIfindex     = 2 // u32, absent once the netdev is gone
	APagePoolNapiID      = 3 // uint
	APagePoolInflight    = 4 // uint, pages
	APagePoolInflightMem = 5 // uint, bytes
	APagePoolDetachTime  = 6 // uint, present once the driver detached the pool
)

// Attribute set "page-pool-stats". Ids 2..7 are reserved by the spec.
const (
	APagePoolStatsInfo                  = 1 // nest, page-pool-info (id, ifindex)
	APagePoolStatsAllocFast             = 8
	APagePoolStatsRecycleReleasedRefcnt = 18
)

// Attribute set "napi".
const (
	ANapiIfindex         = 1 // u32
	ANapiID              = 2 // u32
	ANapiIRQ             = 3 // u32
	ANapiPID             = 4 // u32, threaded NAPI only
	ANapiDeferHardIRQs   = 5 // u32
	ANapiGROFlushTimeout = 6 // uint, nanoseconds
)

// Attribute set "queue".
const (
	AQueueID      = 1 // u32
	AQueueIfindex = 2 // u32
	AQueueType    = 3 // u32, enum queue-type
	AQueueNapiID  = 4 // u32
)

// Attribute set "qstats". Ids 5..7 are reserved by the spec; every
// statistic from 8 on is a uint counter.
const (
	AQstatsIfindex   = 1 // u32
	AQstatsQueueType = 2 // u32, enum queue-type
	AQstatsQueueID   = 3 // u32
	AQstatsScope     = 4 // uint, enum qstats-scope
	QstatsScopeQueue = 1 // NETDEV_QSTATS_SCOPE_QUEUE
	AQstatsFirstStat = 8 // NETDEV_A_QSTATS_RX_PACKETS
)

// QueueTypes is enum queue-type.
var QueueTypes = []string{"rx", "tx"}

func QueueTypeName(t uint32) string {
	if int(t) < len(QueueTypes) {
		return QueueTypes[t]
	}
	return fmt.Sprint(t)
}

// QstatNames are the qstats attributes from NETDEV_A_QSTATS_RX_PACKETS
// (8) on, in spec order: name i has attribute id 8+i.
var QstatNames = [...]string{
	"rx-packets", "rx-bytes", "tx-packets", "tx-bytes",
	"rx-alloc-fail", "rx-hw-drops", "rx-hw-drop-overruns",
	"rx-csum-complete", "rx-csum-unnecessary", "rx-csum-none", "rx-csum-bad",
	"rx-hw-gro-packets", "rx-hw-gro-bytes", "rx-hw-gro-wire-packets", "rx-hw-gro-wire-bytes",
	"rx-hw-drop-ratelimits",
	"tx-hw-drops", "tx-hw-drop-errors", "tx-csum-none", "tx-needs-csum",
	"tx-hw-gso-packets", "tx-hw-gso-bytes", "tx-hw-gso-wire-packets", "tx-hw-gso-wire-bytes",
	"tx-hw-drop-ratelimits", "tx-stop", "tx-wake",
}

// PagePoolStatNames are page-pool-stats attributes 8..18 in spec order.
var PagePoolStatNames = [...]string{
	"alloc-fast", "alloc-slow", "alloc-slow-high-order", "alloc-empty", "alloc-refill", "alloc-waive",
	"recycle-cached", "recycle-cache-full", "recycle-ring", "recycle-ring-full", "recycle-released-refcnt",
}

// The three flag sets of dev-get, bit i named by entry i.
var (
	XDPActNames        = []string{"basic", "redirect", "ndo-xmit", "xsk-zerocopy", "hw-offload", "rx-sg", "ndo-xmit-sg"}
	XDPRxMetadataNames = []string{"timestamp", "hash", "vlan-tag"}
	XSKFlagNames       = []string{"tx-timestamp", "tx-checksum", "tx-launch-time-fifo"}
)

// Qstats is one qstats-get reply, per queue or (perQueue false) per
// device.
type Qstats struct {
	Ifindex   uint32
	QueueType uint32
	QueueID   uint32
	PerQueue  bool
	Present   [len(QstatNames)]bool
	Values    [len(QstatNames)]uint64
}

// DecodeQstats decodes the replies of a qstats-get dump.
func DecodeQstats(msgs []genetlink.Message) ([]Qstats, error) {
	out := make([]Qstats, 0, len(msgs))
	err := genl.DecodeEach(msgs, "qstats-get", func(ad *netlink.AttributeDecoder) error {
		var s Qstats
		for ad.Next() {
			switch t := ad.Type(); {
			case t == AQstatsIfindex:
				s.Ifindex = ad.Uint32()
			case t == AQstatsQueueType:
				s.QueueType = ad.Uint32()
				s.PerQueue = true
			case t == AQstatsQueueID:
				s.QueueID = ad.Uint32()
				s.PerQueue = true
			case t >= AQstatsFirstStat && int(t-AQstatsFirstStat) < len(s.Values):
				i := t - AQstatsFirstStat
				s.Values[i] = nlattr.Uint(ad)
				s.Present[i] = true
			}
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// Dev is one dev-get reply.
type Dev struct {
	Ifindex        uint32
	XDPFeatures    uint64
	XDPZCMaxSegs   uint32
	HasZCMaxSegs   bool
	XDPRxMetadata  uint64
	XSKFeatures    uint64
	HasXSKFeatures bool
	HasRxMetadata  bool
}

// DecodeDevs decodes the replies of a dev-get dump.
func DecodeDevs(msgs []genetlink.Message) ([]Dev, error) {
	out := make([]Dev, 0, len(msgs))
	err := genl.DecodeEach(msgs, "dev-get", func(ad *netlink.AttributeDecoder) error {
		var d Dev
		for ad.Next() {
			switch ad.Type() {
			case ADevIfindex:
				d.Ifindex = ad.Uint32()
			case ADevXDPFeatures:
				d.XDPFeatures = ad.Uint64()
			case ADevXDPZCMaxSegs:
				d.XDPZCMaxSegs = ad.Uint32()
				d.HasZCMaxSegs = true
			case ADevXDPRxMetadataFeatures:
				d.XDPRxMetadata = ad.Uint64()
				d.HasRxMetadata = true
			case ADevXSKFeatures:
				d.XSKFeatures = ad.Uint64()
				d.HasXSKFeatures = true
			}
		}
		out = append(out, d)
		return nil
	})
	return out, err
}

// Queue is one queue-get reply.
type Queue struct {
	Ifindex   uint32
	ID        uint32
	QueueType uint32
	NapiID    uint32
}

// DecodeQueues decodes the replies of a queue-get dump.
func DecodeQueues(msgs []genetlink.Message) ([]Queue, error) {
	out := make([]Queue, 0, len(msgs))
	err := genl.DecodeEach(msgs, "queue-get", func(ad *netlink.AttributeDecoder) error {
		var q Queue
		for ad.Next() {
			switch ad.Type() {
			case AQueueID:
				q.ID = ad.Uint32()
			case AQueueIfindex:
				q.Ifindex = ad.Uint32()
			case AQueueType:
				q.QueueType = ad.Uint32()
			case AQueueNapiID:
				q.NapiID = ad.Uint32()
			}
		}
		out = append(out, q)
		return nil
	})
	return out, err
}

// Napi is one napi-get reply.
type Napi struct {
	Ifindex            uint32
	ID                 uint32
	IRQ                uint32
	HasIRQ             bool
	PID                uint32
	DeferHardIRQs      uint32
	HasDeferHardIRQs   bool
	GROFlushTimeoutNs  uint64
	HasGROFlushTimeout bool
}

// DecodeNapis decodes the replies of a napi-get dump.
func DecodeNapis(msgs []genetlink.Message) ([]Napi, error) {
	out := make([]Napi, 0, len(msgs))
	err := genl.DecodeEach(msgs, "napi-get", func(ad *netlink.AttributeDecoder) error {
		var n Napi
		for ad.Next() {
			switch ad.Type() {
			case ANapiIfindex:
				n.Ifindex = ad.Uint32()
			case ANapiID:
				n.ID = ad.Uint32()
			case ANapiIRQ:
				n.IRQ = ad.Uint32()
				n.HasIRQ = true
			case ANapiPID:
				n.PID = ad.Uint32()
			case ANapiDeferHardIRQs:
				n.DeferHardIRQs = ad.Uint32()
				n.HasDeferHardIRQs = true
			case ANapiGROFlushTimeout:
				n.GROFlushTimeoutNs = nlattr.Uint(ad)
				n.HasGROFlushTimeout = true
			}
		}
		out = append(out, n)
		return nil
	})
	return out, err
}

// PagePool is one page-pool-get reply.
type PagePool struct {
	ID          uint64
	Ifindex     uint32
	NapiID      uint64
	Inflight    uint64
	InflightMem uint64
	Detached    bool
}

// DecodePagePools decodes the replies of a page-pool-get dump.
func DecodePagePools(msgs []genetlink.Message) ([]PagePool, error) {
	out := make([]PagePool, 0, len(msgs))
	err := genl.DecodeEach(msgs, "page-pool-get", func(ad *netlink.AttributeDecoder) error {
		var p PagePool
		for ad.Next() {
			switch ad.Type() {
			case APagePoolID:
				p.ID = nlattr.Uint(ad)
			case APagePoolIfindex:
				p.Ifindex = ad.Uint32()
			case APagePoolNapiID:
				p.NapiID = nlattr.Uint(ad)
			case APagePoolInflight:
				p.Inflight = nlattr.Uint(ad)
			case APagePoolInflightMem:
				p.InflightMem = nlattr.Uint(ad)
			case APagePoolDetachTime:
				p.Detached = true
			}
		}
		out = append(out, p)
		return nil
	})
	return out, err
}

// PoolStats is one page-pool-stats-get reply.
type PoolStats struct {
	ID      uint64
	Ifindex uint32
	Present [len(PagePoolStatNames)]bool
	Values  [len(PagePoolStatNames)]uint64
}

// DecodePagePoolStats decodes the replies of a page-pool-stats-get dump.
func DecodePagePoolStats(msgs []genetlink.Message) ([]PoolStats, error) {
	out := make([]PoolStats, 0, len(msgs))
	err := genl.DecodeEach(msgs, "page-pool-stats-get", func(ad *netlink.AttributeDecoder) error {
		var s PoolStats
		for ad.Next() {
			switch t := ad.Type(); {
			case t == APagePoolStatsInfo:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						switch nad.Type() {
						case APagePoolID:
							s.ID = nlattr.Uint(nad)
						case APagePoolIfindex:
							s.Ifindex = nad.Uint32()
						}
					}
					return nil
				})
			case t >= APagePoolStatsAllocFast && t <= APagePoolStatsRecycleReleasedRefcnt:
				i := t - APagePoolStatsAllocFast
				s.Values[i] = nlattr.Uint(ad)
				s.Present[i] = true
			}
		}
		out = append(out, s)
		return nil
	})
	return out, err
}

// QueueKey is an RX queue of a device.
type QueueKey struct{ Ifindex, Queue uint32 }

// RxQueueIRQs maps each RX queue that the kernel links to a NAPI instance
// with an IRQ to that IRQ (netdev queue-get and napi-get; the NAPI's IRQ
// since Linux 6.9, where the driver reports it).
func RxQueueIRQs(r Reader) (map[QueueKey]uint32, error) {
	napis, err := r.Napis()
	if err != nil {
		return nil, err
	}
	irqOf := map[uint32]uint32{}
	for _, n := range napis {
		if n.HasIRQ {
			irqOf[n.ID] = n.IRQ
		}
	}
	queues, err := r.Queues()
	out := map[QueueKey]uint32{}
	for _, q := range queues {
		if irq, ok := irqOf[q.NapiID]; ok && q.NapiID != 0 && QueueTypeName(q.QueueType) == "rx" {
			out[QueueKey{q.Ifindex, q.ID}] = irq
		}
	}
	return out, err
}

// CmdNames are the commands' names in the spec.
var CmdNames = map[uint8]string{
	CmdDevGet:           "dev-get",
	CmdPagePoolGet:      "page-pool-get",
	CmdPagePoolStatsGet: "page-pool-stats-get",
	CmdQueueGet:         "queue-get",
	CmdNapiGet:          "napi-get",
	CmdQstatsGet:        "qstats-get",
}

// Source runs one netdev dump request and returns its replies.
// genl.Family is the kernel's; tests replay captured replies.
type Source interface {
	Dump(cmd uint8, attrs []byte) ([]genetlink.Message, error)
	Close() error
}

// ErrNoFamily is a kernel without the family (before Linux 6.3): not
// supported here (errors.ErrUnsupported).
var ErrNoFamily = fmt.Errorf(`%w: the kernel has no "netdev" generic netlink family (needs Linux 6.3 or later)`, errors.ErrUnsupported)

// Dial resolves the family and returns the kernel's Reader, a socket per
// dump (genl.Family) decoded; errors.Is(err, ErrNoFamily) where the
// kernel has none.
func Dial() (Decoded, error) {
	f, err := genl.Resolve(FamilyName, 1, ErrNoFamily)
	if err != nil {
		return Decoded{}, err
	}
	return Decoded{f}, nil
}

// Reader is the family's dumps, decoded: what the collectors ask of the
// kernel. Decoded is the kernel's (or a recording's); tests of what uses
// the family give typed values.
type Reader interface {
	// Devs is dev-get of every device.
	Devs() ([]Dev, error)
	// Qstats is qstats-get: per device, or per queue with perQueue.
	Qstats(perQueue bool) ([]Qstats, error)
	// Queues is queue-get of every queue.
	Queues() ([]Queue, error)
	// Napis is napi-get of every NAPI instance.
	Napis() ([]Napi, error)
	// PagePools is page-pool-get of every page pool.
	PagePools() ([]PagePool, error)
	// PagePoolStats is page-pool-stats-get of every page pool.
	PagePoolStats() ([]PoolStats, error)
	Close() error
}

// Decoded reads a Source's replies: the Reader of the kernel (a
// genl.Family) or of recorded replies.
type Decoded struct{ Source }

// dumpDecode runs one dump and decodes its replies; a decoding error
// comes with the replies decoded before it.
func dumpDecode[T any](src Source, cmd uint8, attrs []byte, decode func([]genetlink.Message) ([]T, error)) ([]T, error) {
	msgs, err := src.Dump(cmd, attrs)
	if err != nil {
		return nil, err
	}
	return decode(msgs)
}

func (d Decoded) Devs() ([]Dev, error) { return dumpDecode(d.Source, CmdDevGet, nil, DecodeDevs) }

func (d Decoded) Queues() ([]Queue, error) {
	return dumpDecode(d.Source, CmdQueueGet, nil, DecodeQueues)
}

func (d Decoded) Napis() ([]Napi, error) { return dumpDecode(d.Source, CmdNapiGet, nil, DecodeNapis) }

func (d Decoded) PagePools() ([]PagePool, error) {
	return dumpDecode(d.Source, CmdPagePoolGet, nil, DecodePagePools)
}

func (d Decoded) PagePoolStats() ([]PoolStats, error) {
	return dumpDecode(d.Source, CmdPagePoolStatsGet, nil, DecodePagePoolStats)
}

func (d Decoded) Qstats(perQueue bool) ([]Qstats, error) {
	var attrs []byte
	if perQueue {
		attrs = QueueScope()
	}
	return dumpDecode(d.Source, CmdQstatsGet, attrs, DecodeQstats)
}

// QueueScope is the attributes of a qstats-get request per queue.
func QueueScope() []byte {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(AQstatsScope, QstatsScopeQueue)
	b, err := ae.Encode()
	if err != nil {
		panic(err) // one u32 attribute always encodes
	}
	return b
}

// QstatDocs explains each attribute of QstatNames, condensed from the spec's
// doc strings (Documentation/netlink/specs/netdev.yaml, attribute-set qstats).
var QstatDocs = [len(QstatNames)]string{
	"wire packets received and passed to the stack (XDP counts as the stack: packets XDP consumed are included)",
	"bytes received, see rx-packets",
	"wire packets sent (in device memory, usually DMA-completed)",
	"bytes sent, see tx-packets",
	"skb or buffer allocation failures on the RX path (may or may not drop)",
	"packets that entered the device but never left it (lack of buffers, errors, policies, filters)",
	"packets dropped for transient lack of resources (buffer space, host descriptors)",
	"packets marked CHECKSUM_COMPLETE",
	"packets marked CHECKSUM_UNNECESSARY",
	"packets the device did not checksum",
	"packets with a bad checksum (still delivered)",
	"packets built by HW-GRO coalescing",
	"bytes of packets built by HW-GRO coalescing",
	"wire packets coalesced by HW-GRO",
	"wire bytes coalesced by HW-GRO",
	"packets the device dropped for exceeding its RX rate limit",
	"packets that arrived at the device but never left it (errors, policies, filters)",
	"packets dropped as invalid or malformed",
	"packets that did not need the device to checksum",
	"packets that needed the device to checksum",
	"packets the device segmented (HW-GSO)",
	"bytes of packets the device segmented (HW-GSO)",
	"wire packets produced by HW-GSO",
	"wire bytes produced by HW-GSO",
	"packets the device dropped for exceeding its TX rate limit",
	"times the driver stopped the queue because it was full",
	"times the driver restarted a stopped queue",
}

// PagePoolStatDocs explains each attribute of PagePoolStatNames, condensed
// from the spec (attribute-set page-pool-stats).
var PagePoolStatDocs = [len(PagePoolStatNames)]string{
	"allocations served from the pool's lockless per-NAPI cache",
	"allocations that fell back to the page allocator (order-0)",
	"allocations that fell back to the page allocator (high order)",
	"times the ptr_ring was empty when refilling the cache",
	"pages moved from the ptr_ring into the cache",
	"allocations that could not be recycled (NUMA mismatch) and were waived",
	"pages recycled into the per-NAPI cache",
	"pages not recycled because the cache was full",
	"pages recycled into the ptr_ring",
	"pages not recycled because the ptr_ring was full (released to the page allocator)",
	"pages released because they were still referenced elsewhere",
}

// UnsupportedHint says why a kernel answers cmd with EOPNOTSUPP.
func UnsupportedHint(cmd uint8) string {
	if cmd == CmdPagePoolStatsGet {
		return "the kernel was built without CONFIG_PAGE_POOL_STATS"
	}
	return "the kernel is too old for it"
}
