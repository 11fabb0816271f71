package collector

import (
	"errors"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/collector/internal/prebuilt"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolioctl"
)

// The device configuration behind what its queues show: how RSS spreads
// flows over the RX queues, how often the NIC interrupts, how fast the
// link is and whether flow control throttles it; with the rings and the
// private flags, the device's settings. Gauges, each one ioctl per device
// and --collector.nic.settings-interval (sendSettings); a driver without
// the ethtool_ops member (veth has none of the RSS or coalescing calls) is
// asked once.
var (
	ethtoolLinkSpeed = newFamily("nic", "nic_link_speed_bytes_per_second",
		"Link speed in bytes per second, from ethtool's link modes (ethtool Speed).", Gauge,
		"device").documented("Link speed from ETHTOOL_GSET (ethtool DEV, Speed: Mb/s x 125,000), left out while the driver reports it unknown (link down, a virtual device without one). 64-byte frames at line rate are this / 84 per second (preamble, frame and gap on the wire): 148.8 Mpps at 100 Gbit/s.")
	ethtoolLinkInfo = newFamily("nic", "nic_link_info",
		"The link's duplex (full, half, unknown) and auto-negotiation (on, off) from ETHTOOL_GSET; always 1.", Gauge,
		"device", "duplex", "autoneg")
	ethtoolCoalesceDelay = newFamily("nic", "nic_coalesce_delay_seconds",
		"Interrupt coalescing delay of each direction, from ethtool's coalesce settings (ethtool -c usecs).", Gauge,
		"device", "direction").documented("Interrupt coalescing: how long the NIC waits after a packet before it interrupts, by direction (ethtool -c rx-usecs, tx-usecs; ETHTOOL_GCOALESCE). With adaptive coalescing on, the driver moves it with the load.")
	ethtoolCoalesceFrames = newFamily("nic", "nic_coalesce_max_frames",
		"Interrupt coalescing frame count of each direction, from ethtool's coalesce settings (ethtool -c frames).", Gauge,
		"device", "direction").documented("Interrupt coalescing: packets after which the NIC interrupts however short the wait, by direction (ethtool -c rx-frames, tx-frames); 0 where the driver does not use it.")
	ethtoolCoalesceAdaptive = newFamily("nic", "nic_coalesce_adaptive",
		"1 where the driver adapts the coalescing to the load (ethtool -c Adaptive RX/TX), by direction.", Gauge,
		"device", "direction")
	ethtoolPauseEnabled = newFamily("nic", "nic_pause_enabled",
		"1 if IEEE 802.3x pause is on in this direction, from ethtool's pause parameters (ethtool -a).", Gauge,
		"device", "direction").documented("1 where the port honours received pause frames (direction rx) or sends them when its buffer fills (tx), from ETHTOOL_GPAUSEPARAM (ethtool -a).")
	ethtoolPauseAutoneg = newFamily("nic", "nic_pause_autoneg_enabled",
		"1 if IEEE 802.3x pause is negotiated with the link partner, from ethtool's pause parameters (ethtool -a).", Gauge,
		"device")
	ethtoolRSSEntries = newFamily("nic", "nic_rss_indirection_entries",
		"Entries of the RSS indirection table that point at each RX queue, from ETHTOOL_GRSSH (ethtool -x).", Gauge,
		"device", "queue").documented("Entries of the RSS indirection table that point at each RX queue (ethtool -x; ETHTOOL_GRSSH): a queue's share of the flows hashed is its entries over the table's size, the sum per device. Queues with no entry are not listed.")
	ethtoolRSSInfo = newFamily("nic", "nic_rss_info",
		"The RSS hash function and indirection table size, from ETHTOOL_GRSSH (ethtool -x); always 1.", Gauge,
		"device", "hash_function", "table_size").documented("The RSS hash function in use (toeplitz, xor, crc32; empty where the driver does not say) and the indirection table's size; always 1.")
	ethtoolRSSFields = newFamily("nic", "nic_rss_hash_fields_info",
		"Header fields the NIC hashes for a flow type, from ETHTOOL_GRXFH (ethtool -n rx-flow-hash); always 1.", Gauge,
		"device", "flow_type", "fields").documented("Header fields the NIC hashes for a flow type (tcp4, udp4, tcp6, udp6), in the letters of ethtool -N rx-flow-hash: m L2 destination, v VLAN, t L3 protocol, s IP source, d IP destination, f L4 bytes 0-1 (source port), n L4 bytes 2-3 (destination port); from ETHTOOL_GRXFH. Without f and n every flow between two hosts lands on one queue. Always 1.")
	ethtoolNtupleRules = newFamily("nic", "nic_ntuple_rules",
		"ntuple (flow steering) rules installed on the device, from ETHTOOL_GRXCLSRLCNT.", Gauge,
		"device").documented("Flow steering (ntuple) rules the device holds (ethtool -n; ETHTOOL_GRXCLSRLCNT): a rule steers its flows past the indirection table.")
)

// ethtoolConfigUnsupported is which configuration calls a device's driver
// refused with EOPNOTSUPP.
type ethtoolConfigUnsupported struct {
	link, coalesce, pause, rss, fields, ntuple atomic.Bool
}

// hashFlowTypes are the flow types whose hash fields are read.
var hashFlowTypes = []struct {
	name string
	flow uint32
}{{"tcp4", ethtoolioctl.FlowTCP4}, {"udp4", ethtoolioctl.FlowUDP4}, {"tcp6", ethtoolioctl.FlowTCP6}, {"udp6", ethtoolioctl.FlowUDP6}}

// sendConfig sends the device's link, coalescing, pause and RSS settings.
func (c *ethtoolCollector) sendConfig(ch chan<- prometheus.Metric, d ethtoolDevice, st *ethtoolDev, errs *[]error) {
	un := &st.noConfig
	if c.asks(un.link.Load(), ethtoolLinkSpeed, ethtoolLinkInfo) {
		l, err := c.src.LinkSettings(d.Name)
		if c.optional(err, d.Label, "ETHTOOL_GSET", &un.link, errs) {
			if l.SpeedMbps != ethtoolioctl.SpeedUnknown && l.SpeedMbps != 0 {
				c.fams.send(ch, ethtoolLinkSpeed, float64(l.SpeedMbps)*125_000, d.Label)
			}
			c.fams.send(ch, ethtoolLinkInfo, 1, d.Label, duplexName(l.Duplex), onOff(l.Autoneg))
		}
	}
	if c.asks(un.coalesce.Load(), ethtoolCoalesceDelay, ethtoolCoalesceFrames, ethtoolCoalesceAdaptive) {
		v, err := c.src.Coalesce(d.Name)
		if c.optional(err, d.Label, "ETHTOOL_GCOALESCE", &un.coalesce, errs) {
			for _, dir := range []struct {
				name                    string
				usecs, frames, adaptive uint32
			}{{"rx", v.RxCoalesceUsecs, v.RxMaxCoalescedFrames, v.UseAdaptiveRxCoalesce}, {"tx", v.TxCoalesceUsecs, v.TxMaxCoalescedFrames, v.UseAdaptiveTxCoalesce}} {
				c.fams.send(ch, ethtoolCoalesceDelay, float64(dir.usecs)/1e6, d.Label, dir.name)
				c.fams.send(ch, ethtoolCoalesceFrames, float64(dir.frames), d.Label, dir.name)
				c.fams.send(ch, ethtoolCoalesceAdaptive, float64(min(dir.adaptive, 1)), d.Label, dir.name)
			}
		}
	}
	if c.asks(un.pause.Load(), ethtoolPauseEnabled, ethtoolPauseAutoneg) {
		p, err := c.src.PauseParam(d.Name)
		if c.optional(err, d.Label, "ETHTOOL_GPAUSEPARAM", &un.pause, errs) {
			c.fams.send(ch, ethtoolPauseEnabled, float64(min(p.RxPause, 1)), d.Label, "rx")
			c.fams.send(ch, ethtoolPauseEnabled, float64(min(p.TxPause, 1)), d.Label, "tx")
			c.fams.send(ch, ethtoolPauseAutoneg, float64(min(p.Autoneg, 1)), d.Label)
		}
	}
	c.sendRSS(ch, d, un, errs)
}

// sendRSS sends the indirection table as entries per queue, the hash
// function, the hashed fields per flow type and the ntuple rule count.
func (c *ethtoolCollector) sendRSS(ch chan<- prometheus.Metric, d ethtoolDevice, un *ethtoolConfigUnsupported, errs *[]error) {
	if c.asks(un.rss.Load(), ethtoolRSSEntries, ethtoolRSSInfo) {
		rss, err := c.src.RSS(d.Name)
		if c.optional(err, d.Label, "ETHTOOL_GRSSH", &un.rss, errs) && len(rss.Indir) > 0 {
			entries := map[uint32]int{}
			for _, q := range rss.Indir {
				entries[q]++
			}
			for q, n := range entries {
				c.fams.send(ch, ethtoolRSSEntries, float64(n), d.Label, strconv.FormatUint(uint64(q), 10))
			}
			c.fams.send(ch, ethtoolRSSInfo, 1, d.Label, hashFuncName(rss.HashFunc), strconv.Itoa(len(rss.Indir)))
		}
	}
	if c.asks(un.fields.Load(), ethtoolRSSFields) {
		c.sendHashFields(ch, d, un, errs)
	}
	if c.asks(un.ntuple.Load(), ethtoolNtupleRules) {
		n, err := c.src.NtupleRules(d.Name)
		if errors.Is(err, unix.EINVAL) {
			err = unix.EOPNOTSUPP // a get_rxnfc without the command
		}
		if c.optional(err, d.Label, "ETHTOOL_GRXCLSRLCNT", &un.ntuple, errs) {
			c.fams.send(ch, ethtoolNtupleRules, float64(n), d.Label)
		}
	}
}

// sendHashFields sends the hashed fields of each flow type. A driver may
// answer EINVAL or EOPNOTSUPP for a flow type it does not hash while it
// hashes the others: that type is left out this scrape, and the call is
// given up for the device only when every type is refused (vmxnet3 before
// device version 4 refuses all four).
func (c *ethtoolCollector) sendHashFields(ch chan<- prometheus.Metric, d ethtoolDevice, un *ethtoolConfigUnsupported, errs *[]error) {
	refused := 0
	for _, ft := range hashFlowTypes {
		bits, err := c.src.HashFields(d.Name, ft.flow)
		if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.EOPNOTSUPP) {
			refused++
			continue
		}
		if !c.optional(err, d.Label, "ETHTOOL_GRXFH", &un.fields, errs) {
			return
		}
		c.fams.send(ch, ethtoolRSSFields, 1, d.Label, ft.name, hashFieldLetters(bits))
	}
	if refused == len(hashFlowTypes) {
		c.optional(unix.EOPNOTSUPP, d.Label, "ETHTOOL_GRXFH", &un.fields, errs)
	}
}

// asks reports whether a call is worth making: the driver has not refused
// it and a kept family reads it.
func (c *ethtoolCollector) asks(refused bool, fams ...*Family) bool {
	if refused {
		return false
	}
	for _, f := range fams {
		if c.fams.keeps(f) {
			return true
		}
	}
	return false
}

func duplexName(d uint8) string {
	switch d {
	case 0:
		return "half"
	case 1:
		return "full"
	}
	return "unknown"
}

func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// hashFuncName names the one ETH_RSS_HASH_*_BIT set, "" for none or a
// function this exporter does not know.
func hashFuncName(bits uint8) string {
	for i, name := range ethtoolioctl.HashFuncNames {
		if bits == 1<<i {
			return name
		}
	}
	return ""
}

// hashFieldLetters spells RXH_* bits as ethtool -N does ("sdfn"); RXH_DISCARD
// (the flow type is dropped, not hashed) is "discard".
func hashFieldLetters(bits uint64) string {
	const rxhDiscard = 1 << 31
	if bits&rxhDiscard != 0 {
		return "discard"
	}
	var b strings.Builder
	for i, l := range ethtoolioctl.HashFieldLetters {
		if l != "" && bits&(1<<i) != 0 {
			b.WriteString(l)
		}
	}
	return b.String()
}

// ethtoolSettings is the last read of a device's settings: the series it
// gave, when, and under which plan.
type ethtoolSettings struct {
	at      time.Time
	plan    *ethtoolEntry
	metrics []prometheus.Metric
}

// sendSettings sends the device's settings: rings, private flags, link,
// coalescing, pause and RSS. They change when someone changes them, not
// with the traffic, and reading them is nine ioctls per device, each
// under the RTNL lock; so they are read again once c.settings has passed
// since the last read, or at once when the plan changed (a driver, channel
// count or stat set change is a reconfiguration), and the last read's
// series are sent in between. A read with an error is not kept: the next
// scrape reads again.
func (c *ethtoolCollector) sendSettings(ch chan<- prometheus.Metric, d ethtoolDevice, st *ethtoolDev, e *ethtoolEntry, errs *[]error) {
	now := c.now()
	if s := st.settings.Load(); s != nil && s.plan == e && now.Sub(s.at) < c.settings {
		for _, m := range s.metrics {
			ch <- m
		}
		return
	}
	var read []error
	ms := collectSent(func(out chan<- prometheus.Metric) {
		c.sendRing(out, d, st, &read)
		c.sendPrivFlags(out, d, st, e, &read)
		c.sendConfig(out, d, st, &read)
	})
	for _, m := range ms {
		ch <- m
	}
	if err := errors.Join(read...); err != nil {
		*errs = append(*errs, err)
		st.settings.Store(nil)
		return
	}
	st.settings.Store(&ethtoolSettings{at: now, plan: e, metrics: ms})
}

// collectSent is the series send sends.
func collectSent(send func(chan<- prometheus.Metric)) []prometheus.Metric {
	ch := make(chan prometheus.Metric)
	done := make(chan []prometheus.Metric)
	go func() {
		var ms []prometheus.Metric
		for m := range ch {
			ms = append(ms, m)
		}
		done <- ms
	}()
	send(ch)
	close(ch)
	return <-done
}

func (c *ethtoolCollector) sendRing(ch chan<- prometheus.Metric, d ethtoolDevice, st *ethtoolDev, errs *[]error) {
	if st.noRing.Load() || !c.fams.keeps(ethtoolRing) && !c.fams.keeps(ethtoolRingMax) {
		return
	}
	ring, err := c.src.Ring(d.Name)
	if c.optional(err, d.Label, "ETHTOOL_GRINGPARAM", &st.noRing, errs) {
		c.fams.send(ch, ethtoolRing, float64(ring.RxPending), d.Label, "rx")
		c.fams.send(ch, ethtoolRing, float64(ring.TxPending), d.Label, "tx")
		c.fams.send(ch, ethtoolRingMax, float64(ring.RxMaxPending), d.Label, "rx")
		c.fams.send(ch, ethtoolRingMax, float64(ring.TxMaxPending), d.Label, "tx")
	}
}

func (c *ethtoolCollector) sendPrivFlags(ch chan<- prometheus.Metric, d ethtoolDevice, st *ethtoolDev, e *ethtoolEntry, errs *[]error) {
	if len(e.privBits) == 0 || st.noPrivFlags.Load() || !c.fams.keeps(ethtoolPrivFlag) {
		return
	}
	flags, err := c.src.PrivFlags(d.Name)
	if c.optional(err, d.Label, "ETHTOOL_GPFLAGS", &st.noPrivFlags, errs) {
		ms := make([]prebuilt.Metric, len(e.privBits))
		for i, bit := range e.privBits {
			ms[i] = prebuilt.New(ethtoolPrivFlag.Desc(), prometheus.GaugeValue, float64(flags>>bit&1), e.privPairs[i])
			ch <- &ms[i]
		}
	}
}
