package collector

import (
	"fmt"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolname"
)

// nicSignal is the vendor-neutral signal a driver's stat feeds (nic.go).
type nicSignal uint8

const (
	sigPortRxPackets nicSignal = iota + 1
	sigPortTxPackets
	sigPortRxBytes
	sigPortTxBytes
	// sigDropPort: the port had nowhere to put the packet (its buffer
	// full, PCIe or memory not draining it).
	sigDropPort
	// sigDropRing: no RX descriptor or buffer was posted on the ring
	// (the CPU did not refill it in time).
	sigDropRing
	sigAllocFail
	// sigAllowance: a cloud NIC's per-instance allowance (ENA).
	sigAllowance
)

// driverStat is one stat of a driver's ethtool -S: its name as the
// driver's source writes it, "%u" standing for the queue number of a
// per-queue stat, and the signal it feeds.
type driverStat struct {
	name  string
	sig   nicSignal
	extra string // the allowance label value of sigAllowance
}

// driverTable is what the exporter knows of one driver's names. A
// signal's stats are disjoint counts and are summed: the port's unicast,
// multicast and broadcast packets; drops at the port and on the rings,
// which the driver counts at different points of the receive path.
type driverTable struct {
	drivers []string // ETHTOOL_GDRVINFO driver names
	source  string   // where the names are defined, in the kernel tree
	stats   []driverStat
	// linkDrops is the struct rtnl_link_stats64 field that counts the
	// driver's host-resource drops when no ethtool -S name does.
	linkDrops string
}

// driverTables maps each driver the exporter knows to its names, read from
// the driver sources of Linux 6.12 and 7.2; docs/collectors/nic.md
// says for each why its counters mean what the signal says. A driver
// missing here gets only the kernel's standard counters (nic.go).
var driverTables = []driverTable{
	{drivers: []string{"mlx5_core"}, source: "drivers/net/ethernet/mellanox/mlx5/core/en_stats.c", stats: []driverStat{
		// PPCNT IEEE 802.3 a_frames_received_ok, the eth-mac group's
		// FramesReceivedOK (mlx5e_stats_eth_mac_get).
		{"rx_packets_phy", sigPortRxPackets, ""}, {"tx_packets_phy", sigPortTxPackets, ""},
		{"rx_bytes_phy", sigPortRxBytes, ""}, {"tx_bytes_phy", sigPortTxBytes, ""},
		// RFC 2863 ifInDiscards: "dropped due to lack of buffers on a
		// physical port" (mlx5 counters.rst), the XDP paper's PCIe limit.
		{"rx_discards_phy", sigDropPort, ""},
		// Queue counter: no software buffer posted. mlx5e_get_stats
		// reports it alone as rx_missed_errors.
		{"rx_out_of_buffer", sigDropRing, ""},
		{"rx_buff_alloc_err", sigAllocFail, ""}, {"rx_xsk_buff_alloc_err", sigAllocFail, ""},
	}},
	{drivers: []string{"mlx4_en"}, source: "drivers/net/ethernet/mellanox/mlx4/en_ethtool.c", stats: []driverStat{
		{"rx_packets_phy", sigPortRxPackets, ""}, {"tx_packets_phy", sigPortTxPackets, ""},
		{"rx_bytes_phy", sigPortRxBytes, ""}, {"tx_bytes_phy", sigPortTxBytes, ""},
		// RdropOvflw, "drop due to overflow" (en_port.h), which
		// mlx4_en_DUMP_ETH_STATS reports as rx_fifo_errors.
		{"rx_fifo_errors", sigDropPort, ""},
	}},
	{drivers: []string{"i40e"}, source: "drivers/net/ethernet/intel/i40e/i40e_ethtool.c", stats: append(castPort("port.%s"),
		// GLPRT_RDPC, the port's dropped packets; named port.rx_dropped
		// before commit 5337d2949733 (Linux 6.7).
		driverStat{"port.rx_discards", sigDropPort, ""}, driverStat{"port.rx_dropped", sigDropPort, ""},
		// GLV_RDPC, the VSI's no-descriptor drops, which that commit
		// split out of rx_dropped into rx_missed_errors.
		driverStat{"rx_missed_errors", sigDropRing, ""},
		driverStat{"rx_alloc_fail", sigAllocFail, ""}, driverStat{"rx_pg_alloc_fail", sigAllocFail, ""},
	)},
	{drivers: []string{"ice"}, source: "drivers/net/ethernet/intel/ice/ice_ethtool.c", stats: append(castPort("%s.nic"),
		// PRTRPB_RDPC, the port's receive packet buffer drops: "can mean
		// that there is no PCIe bandwidth" (ice.rst). ice_update_vsi_stats
		// reports it as rx_missed_errors.
		driverStat{"rx_dropped.nic", sigDropPort, ""},
		// GLV_RDPC, the VSI's drops for lack of descriptors.
		driverStat{"rx_dropped", sigDropRing, ""},
		driverStat{"rx_alloc_fail", sigAllocFail, ""}, driverStat{"rx_pg_alloc_fail", sigAllocFail, ""},
	)},
	{drivers: []string{"ixgbe"}, source: "drivers/net/ethernet/intel/ixgbe/ixgbe_ethtool.c", stats: []driverStat{
		{"rx_pkts_nic", sigPortRxPackets, ""}, {"tx_pkts_nic", sigPortTxPackets, ""},
		{"rx_bytes_nic", sigPortRxBytes, ""}, {"tx_bytes_nic", sigPortTxBytes, ""},
		// MPC, missed packets: the packet buffer was full
		// (ixgbe_update_stats sums it into rx_missed_errors).
		{"rx_missed_errors", sigDropPort, ""},
		// QPRDC, packets a queue dropped for lack of descriptors.
		{"rx_no_dma_resources", sigDropRing, ""},
		{"alloc_rx_page_failed", sigAllocFail, ""}, {"alloc_rx_buff_failed", sigAllocFail, ""},
	}},
	{drivers: []string{"igb"}, source: "drivers/net/ethernet/intel/igb/igb_ethtool.c", stats: e1000Family("rx_queue_%u_drops", "rx_queue_%u_alloc_failed")},
	{drivers: []string{"igc"}, source: "drivers/net/ethernet/intel/igc/igc_ethtool.c", stats: e1000Family("rx_queue_%u_drops", "rx_queue_%u_alloc_failed")},
	{drivers: []string{"e1000e"}, source: "drivers/net/ethernet/intel/e1000e/ethtool.c", stats: append(e1000Family("", "alloc_rx_buff_failed"),
		driverStat{"rx_dma_failed", sigAllocFail, ""})},
	{drivers: []string{"bnxt_en"}, source: "drivers/net/ethernet/broadcom/bnxt/bnxt_ethtool.c", stats: []driverStat{
		// Port statistics; rx_good_frames is also the eth-mac group's
		// FramesReceivedOK (bnxt_get_eth_mac_stats).
		{"rx_good_frames", sigPortRxPackets, ""}, {"tx_good_frames", sigPortTxPackets, ""},
		{"rx_bytes", sigPortRxBytes, ""}, {"tx_bytes", sigPortTxBytes, ""},
		{"rx_stat_discard", sigDropPort, ""},
		// The rings' rx_discard_pkts, summed into rx_missed_errors by
		// bnxt_get_ring_stats.
		{"[%u]: rx_discards", sigDropRing, ""},
		{"rx_total_oom_discards", sigAllocFail, ""},
	}},
	{drivers: []string{"ena"}, source: "drivers/net/ethernet/amazon/ena/ena_ethtool.c", stats: []driverStat{
		// No port counter, and no drop counter: the device's rx_drops
		// reach only rtnl_link_stats64 rx_dropped, added to the XDP_DROP
		// verdicts (ena_get_stats64), so they are not a host drop here.
		{"queue_%u_rx_page_alloc_fail", sigAllocFail, ""}, {"queue_%u_rx_skb_alloc_fail", sigAllocFail, ""},
		{"queue_%u_rx_dma_mapping_err", sigAllocFail, ""},
		{"bw_in_allowance_exceeded", sigAllowance, "bw_in"}, {"bw_out_allowance_exceeded", sigAllowance, "bw_out"},
		{"pps_allowance_exceeded", sigAllowance, "pps"}, {"conntrack_allowance_exceeded", sigAllowance, "conntrack"},
		{"linklocal_allowance_exceeded", sigAllowance, "linklocal"},
	}},
	{drivers: []string{"gve"}, source: "drivers/net/ethernet/google/gve/gve_ethtool.c", stats: []driverStat{
		// The NIC's per-queue report (RX_NO_BUFFERS_POSTED,
		// gve_adminq.h): packets that found no buffer posted.
		{"rx_no_buffers_posted[%u]", sigDropRing, ""},
		// What gve_get_queue_stats_rx reports as qstats alloc-fail.
		{"rx_skb_alloc_fail", sigAllocFail, ""}, {"rx_buf_alloc_fail", sigAllocFail, ""},
	}},
	{drivers: []string{"idpf"}, source: "drivers/net/ethernet/intel/idpf/idpf_ethtool.c", stats: []driverStat{
		{"rx-unicast_pkts", sigPortRxPackets, ""}, {"rx-multicast_pkts", sigPortRxPackets, ""}, {"rx-broadcast_pkts", sigPortRxPackets, ""},
		{"tx-unicast_pkts", sigPortTxPackets, ""}, {"tx-multicast_pkts", sigPortTxPackets, ""}, {"tx-broadcast_pkts", sigPortTxPackets, ""},
	}, linkDrops: "rx_dropped"}, // the vport's rx_discards (idpf_send_get_stats_msg)
	{drivers: []string{"vmxnet3"}, source: "drivers/net/vmxnet3/vmxnet3_ethtool.c", stats: []driverStat{
		// The device's UPT1 queue statistics, one block per queue with
		// the same names: they add up.
		{"ucast pkts rx", sigPortRxPackets, ""}, {"mcast pkts rx", sigPortRxPackets, ""}, {"bcast pkts rx", sigPortRxPackets, ""},
		{"ucast pkts tx", sigPortTxPackets, ""}, {"mcast pkts tx", sigPortTxPackets, ""}, {"bcast pkts tx", sigPortTxPackets, ""},
		{"ucast bytes rx", sigPortRxBytes, ""}, {"mcast bytes rx", sigPortRxBytes, ""}, {"bcast bytes rx", sigPortRxBytes, ""},
		{"ucast bytes tx", sigPortTxBytes, ""}, {"mcast bytes tx", sigPortTxBytes, ""}, {"bcast bytes tx", sigPortTxBytes, ""},
		// pktsRxOutOfBuf: the device found no RX buffer. It is in no
		// rtnl_link_stats64 field (vmxnet3_get_stats64).
		{"pkts rx OOB", sigDropRing, ""},
		{"rx buf alloc fail", sigAllocFail, ""},
	}},
	{drivers: []string{"nfp", "nfp_netvf"}, source: "drivers/net/ethernet/netronome/nfp/nfp_net_ethtool.c", stats: []driverStat{
		// The physical port's MAC statistics (PF only).
		{"mac.rx_frames_received_ok", sigPortRxPackets, ""}, {"mac.tx_frames_transmitted_ok", sigPortTxPackets, ""},
		{"mac.rx_octets", sigPortRxBytes, ""}, {"mac.tx_octets", sigPortTxBytes, ""},
		// RMON etherStatsDropEvents: drops for lack of resources.
		{"mac.rx_drop_events", sigDropPort, ""},
		// The vNIC's discards (NFP_NET_CFG_STATS_RX_DISCARDS).
		{"dev_rx_discards", sigDropRing, ""},
		{"rx_replace_buf_alloc_fail", sigAllocFail, ""},
	}},
	{drivers: []string{"sfc"}, source: "drivers/net/ethernet/sfc/ef10.c and ethtool_common.c", stats: []driverStat{
		{"port_rx_packets", sigPortRxPackets, ""}, {"port_tx_packets", sigPortTxPackets, ""},
		{"port_rx_bytes", sigPortRxBytes, ""}, {"port_tx_bytes", sigPortTxBytes, ""},
		// The port FIFO overflowed; efx_ef10_update_stats_pf reports it
		// as rx_fifo_errors.
		{"port_rx_overflow", sigDropPort, ""},
		// Whole packets dropped, and packets truncated, for want of a
		// descriptor: disjoint, both in rx_dropped.
		{"port_rx_nodesc_drops", sigDropRing, ""}, {"rx_nodesc_trunc", sigDropRing, ""},
		{"rx_noskb_drops", sigAllocFail, ""},
	}},
	// veth counts the frames its XDP ring could not take (the peer's
	// ndo_xdp_xmit, peer_tq_xdp_xmit_err) and its queues' drops only in
	// rtnl_link_stats64 rx_dropped (veth_get_stats64).
	{drivers: []string{"veth"}, source: "drivers/net/veth.c", linkDrops: "rx_dropped"},
	// virtio_net names no host-resource drop: rx_queue_%u_drops are the
	// driver's own (XDP, malformed). Its device statistics (virtio 1.3
	// VIRTIO_NET_F_DEVICE_STATS) come as netdev qstats.
	{drivers: []string{"virtio_net"}, source: "drivers/net/virtio_net.c"},
}

// castPort is i40e's and ice's port counters, name being the format of
// each (port.%s, %s.nic): packets by cast (unicast, multicast, broadcast)
// and bytes, in both directions.
func castPort(name string) []driverStat {
	var s []driverStat
	for _, d := range []struct {
		dir          string
		pkts, octets nicSignal
	}{{"rx", sigPortRxPackets, sigPortRxBytes}, {"tx", sigPortTxPackets, sigPortTxBytes}} {
		for _, cast := range []string{"unicast", "multicast", "broadcast"} {
			s = append(s, driverStat{fmt.Sprintf(name, d.dir+"_"+cast), d.pkts, ""})
		}
		s = append(s, driverStat{fmt.Sprintf(name, d.dir+"_bytes"), d.octets, ""})
	}
	return s
}

// e1000Family is the igb, igc and e1000e names: GPRC, GPTC, GORC, GOTC as
// rx_packets, tx_packets, rx_bytes, tx_bytes, and MPC (the packet buffer
// was full) as rx_missed_errors; the rings' RQDPC as queueDrops (none on
// single-queue e1000e) and the buffer allocation failures.
func e1000Family(queueDrops, allocFail string) []driverStat {
	s := []driverStat{
		{"rx_packets", sigPortRxPackets, ""}, {"tx_packets", sigPortTxPackets, ""},
		{"rx_bytes", sigPortRxBytes, ""}, {"tx_bytes", sigPortTxBytes, ""},
		{"rx_missed_errors", sigDropPort, ""},
		{allocFail, sigAllocFail, ""},
	}
	if queueDrops != "" {
		s = append(s, driverStat{queueDrops, sigDropRing, ""})
	}
	return s
}

// driverIndex finds a driver's table and, in it, a stat by its parsed
// name: a per-queue stat by its base (queue number removed), a
// device-wide one by its name without surrounding spaces (vmxnet3 indents
// its names).
type driverIndex struct {
	table    *driverTable
	perQueue map[string]driverStat
	device   map[string]driverStat
}

var driverIndexes = indexDrivers(driverTables)

func indexDrivers(tables []driverTable) map[string]*driverIndex {
	out := map[string]*driverIndex{}
	for i := range tables {
		t := &tables[i]
		idx := &driverIndex{table: t, perQueue: map[string]driverStat{}, device: map[string]driverStat{}}
		for _, s := range t.stats {
			// A per-queue name the parser cannot read is left out;
			// TestDriverTables fails on it.
			if strings.Contains(s.name, "%u") {
				if base, _, ok := ethtoolname.ParseQueue(strings.Replace(s.name, "%u", "0", 1)); ok {
					idx.perQueue[base] = s
				}
				continue
			}
			idx.device[s.name] = s
		}
		for _, d := range t.drivers {
			out[d] = idx
		}
	}
	return out
}

// lookup is the driver stat st is, if the driver has a table and names it.
func (idx *driverIndex) lookup(st ethtoolname.Stat) (driverStat, bool) {
	if idx == nil {
		return driverStat{}, false
	}
	if st.PerQueue {
		s, ok := idx.perQueue[st.Base]
		return s, ok
	}
	s, ok := idx.device[strings.TrimSpace(st.Name)]
	return s, ok
}

// signalTarget is the series of a stat the driver's table names: the
// stats of every queue, and vmxnet3's names repeated per queue, add up.
func signalTarget(dev string, ds driverStat) (ethtoolTarget, *Family) {
	fam, labels, dir, where := nicHostDrops, []string{dev, "ring"}, "", "ring"
	switch ds.sig {
	case sigPortRxPackets:
		fam, labels, dir, where = nicPortPackets, []string{dev, "rx"}, "rx", ""
	case sigPortTxPackets:
		fam, labels, dir, where = nicPortPackets, []string{dev, "tx"}, "tx", ""
	case sigPortRxBytes:
		fam, labels, dir, where = nicPortBytes, []string{dev, "rx"}, "rx", ""
	case sigPortTxBytes:
		fam, labels, dir, where = nicPortBytes, []string{dev, "tx"}, "tx", ""
	case sigDropPort:
		labels[1], where = "port", "port"
	case sigAllocFail:
		fam, labels, where = nicAllocFailures, []string{dev}, ""
	case sigAllowance:
		t := familyTarget(ethtoolAllowance, 1, []string{dev, ds.extra})
		t.sum = true
		return t, ethtoolAllowance
	}
	t := familyTarget(fam, 1, labels)
	t.sum, t.std, t.drop = true, stdKeyOf(ds.sig), ds.sig == sigDropPort || ds.sig == sigDropRing
	t.source = &signalSource{fam: fam, direction: dir, where: where, stats: []string{ds.name}}
	return t, fam
}
