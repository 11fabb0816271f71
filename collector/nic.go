package collector

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolnl"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
)

// The vendor-neutral NIC signals, one series set per device and signal,
// each from one source, named in xdp_nic_signal_source_info, never two
// summed:
//
//   - port packets and bytes: the IEEE 802.3 MAC counters of ethtool's
//     eth-mac group where the driver fills them (FramesReceivedOK and
//     OctetsReceivedOK are defined alike for every driver), else the
//     driver's own names (driverTables);
//   - receive buffer allocation failures: netdev qstats rx-alloc-fail where
//     the driver reports it (its definition is the kernel's), else the
//     driver's names;
//   - host-resource drops: the driver's names where the exporter knows
//     them, else qstats rx-hw-drop-overruns, else rtnl_link_stats64. Here
//     the standard counters come last because on the drivers that fill
//     them they hold part of the signal: mlx5 reports only rx_out_of_buffer
//     as rx_missed_errors (not rx_discards_phy, the port's drops), ice only
//     its port's drops, i40e only its VSI's, bnxt only its rings'; sfc's
//     qstats overruns are its truncations alone. rx_missed_errors is
//     "packets dropped by the device due to lack of buffer space"
//     (include/uapi/linux/if_link.h), zero where a driver does not count
//     it: on a driver the exporter does not know it is the best there is.
var (
	nicPortPackets = newFamily("nic", "nic_port_packets_total", "Packets received or sent at the port before any host drop, from ethtool's eth-mac or the driver's counters.",
		Counter, "device", "direction").documented("Packets received (direction rx) or sent at the port, before any drop for lack of host resources: the offered load. From the IEEE 802.3 FramesReceivedOK/FramesTransmittedOK of ethtool's eth-mac group (Linux 5.13) where the driver fills them, else the driver's ethtool -S names, summed (docs/collectors/nic.md lists them per driver); xdp_nic_signal_source_info says which.")
	nicPortBytes = newFamily("nic", "nic_port_bytes_total", "Bytes received or sent at the port, from ethtool's eth-mac statistics or the driver's port counters.",
		Counter, "device", "direction").documented("Bytes received or sent at the port, from the same source as xdp_nic_port_packets_total (eth-mac OctetsReceivedOK/OctetsTransmittedOK, or the driver's names).")
	nicHostDrops = newFamily("nic", "nic_rx_host_drops_total", "Received packets the NIC dropped for lack of host resources, at the port or at the RX ring.",
		Counter, "device", "where").documented("Received packets the NIC dropped for lack of host resources: where=port, the port had nowhere to put them (its buffer full: PCIe, memory or DDIO did not drain it); where=ring, no RX descriptor or buffer was posted (the CPU did not refill the ring in time); no where label where the source does not say which (qstats rx-hw-drop-overruns, struct rtnl_link_stats64). From the driver's ethtool -S names, else qstats, else rtnl_link_stats64, per device; xdp_nic_signal_source_info says which.")
	nicAllocFailures = newFamily("nic", "nic_rx_alloc_failures_total", "Receive buffer allocation failures, from netdev qstats rx-alloc-fail or the driver's ethtool -S counter.",
		Counter, "device").documented("Receive buffer (page, skb, DMA mapping) allocation failures: netdev qstats rx-alloc-fail where the driver reports it, else the driver's ethtool -S names, summed; xdp_nic_signal_source_info says which.")
	nicSignalSource = newFamily("nic", "nic_signal_source_info", "The counters a NIC signal series of the device is read from; always 1.",
		Gauge, "device", "family", "direction", "where", "source", "stat").documented("One series per series of xdp_nic_port_packets_total, xdp_nic_port_bytes_total, xdp_nic_rx_host_drops_total and xdp_nic_rx_alloc_failures_total: family is the signal's family, direction and where its labels (absent where it has none), source ethtool (the driver's ethtool -S names), eth_mac, netdev_qstats or link_stats64, stat the counters summed, comma-separated. A kernel upgrade that adds a source changes this series, not the signal's.")
	nicPauseFrames = newFamily("nic", "nic_pause_frames_total", "IEEE 802.3x pause frames the port received or sent, from ethtool's pause statistics.",
		Counter, "device", "direction").documented("IEEE 802.3x pause frames the port received (direction rx: the link partner asked it to stop sending) or sent (tx: its own receive buffer filled, so it asked the partner to stop), from ethtool's pause statistics (ethtool -I -a; Linux 5.12 and a driver with get_pause_stats: mlx5, bnxt, ice, i40e, ixgbe, ...).")
	nicFECBlocks = newFamily("nic", "nic_fec_blocks_total", "FEC blocks the PHY corrected or could not correct, from ethtool's FEC statistics (FEC_GET).",
		Counter, "device", "result").documented("Forward error correction blocks the PHY corrected (result corrected: bit errors on the link it fixed) or could not correct (uncorrectable: frames lost on the link before any counter of the host), all lanes, from ethtool's FEC statistics (ethtool -I --show-fec; Linux 5.14 and a driver with get_fec_stats: mlx5, ice, bnxt, sfc, ...).")
	ethtoolFECInfo = newFamily("nic", "nic_fec_info", "The FEC encoding in use on the link, from ethtool's FEC_GET; always 1.",
		Gauge, "device", "encoding").documented("The FEC encoding in use on the link (off, rs, baser, llrs), from ethtool's FEC_GET (ethtool --show-fec, Active FEC encoding; Linux 5.14); always 1.")
	ethtoolAllowance = newFamily("nic", "nic_allowance_exceeded_packets_total", "Packets the cloud queued or dropped over an instance allowance, from ENA's ethtool -S *_allowance_exceeded.",
		Counter, "device", "allowance").documented("Packets the cloud queued or dropped because the instance exceeded an allowance: bw_in, bw_out (bandwidth), pps, conntrack, linklocal (ethtool -S <allowance>_allowance_exceeded; ENA).")
)

// Values of xdp_nic_signal_source_info's source label.
const (
	srcEthtool = "ethtool"
	srcEthMAC  = "eth_mac"
	srcQstats  = "netdev_qstats"
	srcStats64 = "link_stats64"
)

// defaultLinkDrops is the rtnl_link_stats64 field of a driver with no
// drop names and no qstats overruns.
const defaultLinkDrops = "rx_missed_errors"

// stdKey names a standard counter that, where the device has it, takes a
// signal's place from the driver's names.
type stdKey uint8

const (
	stdNone stdKey = iota
	stdMACRxFrames
	stdMACTxFrames
	stdMACRxOctets
	stdMACTxOctets
	stdAllocFail
)

// stdKeyOf is the standard counter that replaces sig, if any.
func stdKeyOf(sig nicSignal) stdKey {
	switch sig {
	case sigPortRxPackets:
		return stdMACRxFrames
	case sigPortTxPackets:
		return stdMACTxFrames
	case sigPortRxBytes:
		return stdMACRxOctets
	case sigPortTxBytes:
		return stdMACTxOctets
	case sigAllocFail:
		return stdAllocFail
	}
	return stdNone
}

// macStats are the eth-mac counters of the port families, by stdKey.
var macStats = []struct {
	key       stdKey
	id        int
	fam       *Family
	direction string
}{
	{stdMACRxFrames, ethtoolnl.FramesReceivedOK, nicPortPackets, "rx"},
	{stdMACTxFrames, ethtoolnl.FramesTransmittedOK, nicPortPackets, "tx"},
	{stdMACRxOctets, ethtoolnl.OctetsReceivedOK, nicPortBytes, "rx"},
	{stdMACTxOctets, ethtoolnl.OctetsTransmittedOK, nicPortBytes, "tx"},
}

// The qstats the NIC signals read, by name.
const (
	qstatAllocFailName = "rx-alloc-fail"
	qstatOverrunsName  = "rx-hw-drop-overruns"
)

// Their indexes of netdev.QstatNames, derived from the names so that a
// reordered or extended list cannot leave them pointing at another stat.
var (
	qstatAllocFail    = qstatIndex(qstatAllocFailName)
	qstatDropOverruns = qstatIndex(qstatOverrunsName)
)

// qstatIndex is the index of name in netdev.QstatNames.
func qstatIndex(name string) int {
	i := slices.Index(netdev.QstatNames[:], name)
	if i < 0 {
		panic("collector: netdev has no qstat " + name)
	}
	return i
}

// nicStandard is the kernel's standard counters of every device, read
// once per scrape, by ifindex.
type nicStandard struct {
	mac    map[int]ethtoolnl.MAC
	qstats map[int]netdev.Qstats
	link   map[int]rtnl.LinkStats
	pause  map[int]ethtoolnl.Pause
	fec    map[int]ethtoolnl.FEC
}

// replaces reports whether the device's standard counters hold key.
func (s *nicStandard) replaces(index int, key stdKey) bool {
	switch key {
	case stdNone:
		return false
	case stdAllocFail:
		q, ok := s.qstats[index]
		return ok && q.Present[qstatAllocFail]
	}
	m, ok := s.mac[index]
	if !ok {
		return false
	}
	for _, ms := range macStats {
		if ms.key == key {
			return m.Present[ms.id]
		}
	}
	return false
}

// standardSources reads the standard counters the kept families need. A
// source this kernel lacks is said once at info and then not asked for;
// a source that fails is the collector's error, the others still used.
type standardSources struct {
	mac, qstats, link, pause, fec standardSource
}

// standardSource is what the collector knows of one standard source.
type standardSource struct {
	unsupported atomic.Bool // not supported here
	// idle is the last read's selected devices when none of them had a
	// counter of this source (veths have no eth-mac, qstats, pause or FEC
	// statistics): the source is asked again when the devices change or
	// the settings interval has passed, so that a host of many veths does
	// not dump four sources per scrape for nothing.
	idle atomic.Pointer[idleSource]
}

type idleSource struct {
	devices []int
	at      time.Time
}

func (c *ethtoolCollector) readStandard(devices []int) (*nicStandard, error) {
	var errs []error
	port := c.fams.keeps(nicPortPackets) || c.fams.keeps(nicPortBytes)
	drops, alloc := c.fams.keeps(nicHostDrops), c.fams.keeps(nicAllocFailures)
	read := standardReader{c, &errs, devices, c.now()}
	std := &nicStandard{
		mac: readOne(read, port, &c.unsupported.mac, "eth-mac", "the kernel needs ETHTOOL_MSG_STATS_GET (Linux 5.13): port counters come from the driver's names",
			c.src.MACStats, func(m ethtoolnl.MAC) uint32 { return m.Ifindex }, nil,
			func(m ethtoolnl.MAC) bool { return slices.Contains(m.Present[:], true) }),
		qstats: readOne(read, drops || alloc, &c.unsupported.qstats, "qstats-get", "the kernel needs netdev qstats (Linux 6.9): drops and allocation failures come from the driver's names and rtnl_link_stats64",
			c.src.Qstats, func(q netdev.Qstats) uint32 { return q.Ifindex }, mergeQstats,
			func(q netdev.Qstats) bool { return slices.Contains(q.Present[:], true) }),
		link: readOne(read, drops, &c.unsupported.link, "rtnl_link_stats64", "the kernel needs RTM_GETSTATS (Linux 4.7): no drop signal where the driver names none",
			c.src.LinkStats, func(l rtnl.LinkStats) uint32 { return l.Index }, nil, nil),
		pause: readOne(read, c.fams.keeps(nicPauseFrames), &c.unsupported.pause, "pause-stats", "the kernel needs ETHTOOL_FLAG_STATS on PAUSE_GET (Linux 5.12): no pause frame counters",
			c.src.PauseStats, func(p ethtoolnl.Pause) uint32 { return p.Ifindex }, nil,
			func(p ethtoolnl.Pause) bool { return p.HasRXFrames || p.HasTXFrames }),
		fec: readOne(read, c.fams.keeps(nicFECBlocks) || c.fams.keeps(ethtoolFECInfo), &c.unsupported.fec, "fec-stats", "the kernel needs ethtool FEC_GET (Linux 5.14): no FEC mode or block counters",
			c.src.FECStats, func(f ethtoolnl.FEC) uint32 { return f.Ifindex }, nil,
			func(f ethtoolnl.FEC) bool { return f.HasActive || f.HasCorrected || f.HasUncorr }),
	}
	return std, errors.Join(errs...)
}

// standardReader is the collector, the errors, the selected devices (by
// ifindex, sorted) and the time of one readStandard.
type standardReader struct {
	c       *ethtoolCollector
	errs    *[]error
	devices []int
	now     time.Time
}

// readOne reads one standard source, if a kept family needs it and the
// kernel has it, by ifindex; merge joins two replies of one device (nil:
// the first wins); has says whether a reply holds a counter (nil: every
// reply does, and the source is never idle).
func readOne[T any](r standardReader, needed bool, src *standardSource, what, hint string,
	read func() ([]T, error), index func(T) uint32, merge func(a, b T) T, has func(T) bool) map[int]T {
	if !needed || src.unsupported.Load() {
		return nil
	}
	if idle := src.idle.Load(); idle != nil && slices.Equal(idle.devices, r.devices) && r.now.Sub(idle.at) < r.c.settings {
		return nil
	}
	values, err := read()
	r.c.standardErr(what, hint, err, &src.unsupported, r.errs)
	out := make(map[int]T, len(values))
	useful := has == nil
	for _, v := range values {
		i := int(index(v))
		if prev, ok := out[i]; ok && merge != nil {
			v = merge(prev, v)
		} else if ok {
			continue
		}
		out[i] = v
		useful = useful || has(v) && slices.Contains(r.devices, i)
	}
	if useful || err != nil {
		src.idle.Store(nil)
	} else {
		src.idle.Store(&idleSource{devices: r.devices, at: r.now})
	}
	return out
}

// mergeQstats adds the counters of b that a lacks: a device's replies
// share out its counters.
func mergeQstats(a, b netdev.Qstats) netdev.Qstats {
	a.Ifindex = b.Ifindex
	for i, ok := range b.Present {
		if ok && !a.Present[i] {
			a.Values[i], a.Present[i] = b.Values[i], true
		}
	}
	return a
}

// standardErr sorts the error of one standard source. An unsupported
// one is said in the form of the netdev collector's missing commands, so
// that the kernel matrix tabulates both.
func (c *ethtoolCollector) standardErr(what, hint string, err error, unsupported *atomic.Bool, errs *[]error) {
	switch {
	case err == nil:
	case errors.Is(err, errors.ErrUnsupported):
		if !unsupported.Swap(true) {
			c.logger.Info("source of NIC signals not supported by this kernel; the next source is used", "source", what, "hint", hint, "err", err)
		}
	default:
		*errs = append(*errs, fmt.Errorf("%s: %w", what, err))
	}
}

// sendStandard sends the device's signals that come from the standard
// counters: the eth-mac port counters and qstats rx-alloc-fail (the plan
// left the driver's names for those out), and, where the plan has no
// drop name, the drops of qstats or rtnl_link_stats64.
func (c *ethtoolCollector) sendStandard(ch chan<- prometheus.Metric, d ethtoolDevice, driver string, e *ethtoolEntry, std *nicStandard) {
	if m, ok := std.mac[d.Index]; ok {
		for _, ms := range macStats {
			if m.Present[ms.id] {
				c.fams.send(ch, ms.fam, float64(m.Values[ms.id]), d.Label, ms.direction)
				c.sendSource(ch, d.Label, ms.fam, ms.direction, "", srcEthMAC, ethtoolnl.MACStatNames[ms.id])
			}
		}
	}
	if p, ok := std.pause[d.Index]; ok {
		if p.HasRXFrames {
			c.fams.send(ch, nicPauseFrames, float64(p.RXFrames), d.Label, "rx")
		}
		if p.HasTXFrames {
			c.fams.send(ch, nicPauseFrames, float64(p.TXFrames), d.Label, "tx")
		}
	}
	if f, ok := std.fec[d.Index]; ok {
		if name, known := ethtoolnl.FECModeNames[f.Active]; f.HasActive && known {
			c.fams.send(ch, ethtoolFECInfo, 1, d.Label, name)
		}
		if f.HasCorrected {
			c.fams.send(ch, nicFECBlocks, float64(f.Corrected), d.Label, "corrected")
		}
		if f.HasUncorr {
			c.fams.send(ch, nicFECBlocks, float64(f.Uncorrectable), d.Label, "uncorrectable")
		}
	}
	q, hasQ := std.qstats[d.Index]
	if hasQ && q.Present[qstatAllocFail] {
		c.fams.send(ch, nicAllocFailures, float64(q.Values[qstatAllocFail]), d.Label)
		c.sendSource(ch, d.Label, nicAllocFailures, "", "", srcQstats, qstatAllocFailName)
	}
	if e != nil && e.hasDrops {
		return
	}
	if hasQ && q.Present[qstatDropOverruns] {
		c.fams.send(ch, nicHostDrops, float64(q.Values[qstatDropOverruns]), d.Label, "")
		c.sendSource(ch, d.Label, nicHostDrops, "", "", srcQstats, qstatOverrunsName)
		return
	}
	field := defaultLinkDrops
	if idx := driverIndexes[driver]; idx != nil && idx.table.linkDrops != "" {
		field = idx.table.linkDrops
	}
	if l, ok := std.link[d.Index]; ok {
		if v, ok := l.Field(field); ok {
			c.fams.send(ch, nicHostDrops, float64(v), d.Label, "")
			c.sendSource(ch, d.Label, nicHostDrops, "", "", srcStats64, field)
		}
	}
}

// sendSource sends the xdp_nic_signal_source_info series of the signal
// series of fam with direction and where (empty: the family has no such
// label).
func (c *ethtoolCollector) sendSource(ch chan<- prometheus.Metric, dev string, fam *Family, direction, where, source, stat string) {
	if c.fams.keeps(fam) {
		c.fams.send(ch, nicSignalSource, 1, dev, fam.Name, direction, where, source, stat)
	}
}

// logStandard says at debug which source each signal of a new plan
// takes, once per string set.
func logStandard(logger *slog.Logger, dev, driver string, e *ethtoolEntry) {
	if driverIndexes[driver] == nil {
		logger.Debug("driver without a name table: its NIC signals come from the kernel's standard counters", "device", dev, "driver", driver)
		return
	}
	logger.Debug("NIC signals from the driver's names", "device", dev, "driver", driver, "host_drops_named", e.hasDrops)
}
