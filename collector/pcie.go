package collector

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"path/filepath"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/irq"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci"
)

func init() {
	register(Registration{
		Name:           "pcie",
		Help:           "PCIe link speed and width of each NIC and the bridges above it, AER error counters, NUMA node, whether the CPUs serving each RX queue are on the NIC's node, and each RX queue's interrupts (sysfs, /proc/irq, /proc/interrupts)",
		DefaultEnabled: true,
		Requires:       "sysfs with PCI devices (/sys/bus/pci); link files need PCI Express, AER counters Linux 5.7+ and a device with AER; queue IRQs from netdev netlink (Linux 6.9+) or the drivers' IRQ names. No capability.",
		DeviceLabel:    true,
		Flags: func(f *FlagSet) Builder {
			return func(logger *slog.Logger, shared Shared) (Collector, error) {
				return NewPCIeCollector(PCIeConfig{SysFS: shared.SysFS, ProcFS: shared.ProcFS, Filter: shared.Filter}, logger)
			}
		},
	})
}

var (
	pcieDeviceInfo = newFamily("pcie", "pcie_device_info",
		"A network device backed by a PCI function: its address and NUMA node (-1: the platform gives none).",
		Gauge, "device", "pci_address", "numa_node")
	pcieLinkSpeed = newFamily("pcie", "pcie_link_speed_transfers_per_second",
		"Current PCIe link speed per hop of the NIC's path, from sysfs current_link_speed.",
		Gauge, "device", "hop", "pci_address").documented("Current PCIe link speed (current_link_speed), per hop from the NIC's function (hop 0) up through each bridge to the root port.")
	pcieLinkMaxSpeed = newFamily("pcie", "pcie_link_max_speed_transfers_per_second",
		"Maximum PCIe link speed the function supports (max_link_speed), per hop.",
		Gauge, "device", "hop", "pci_address")
	pcieLinkWidth = newFamily("pcie", "pcie_link_width_lanes",
		"Current PCIe link width in lanes (current_link_width), per hop.",
		Gauge, "device", "hop", "pci_address")
	pcieLinkMaxWidth = newFamily("pcie", "pcie_link_max_width_lanes",
		"Maximum PCIe link width in lanes (max_link_width), per hop.",
		Gauge, "device", "hop", "pci_address")
	pcieLinkBandwidth = newFamily("pcie", "pcie_link_bandwidth_bytes_per_second",
		"Bandwidth of the link as trained per direction: lanes x transfer rate x encoding / 8, per hop.",
		Gauge, "device", "hop", "pci_address").documented("Theoretical bandwidth of the link as trained, per direction: lanes x transfer rate x the generation's encoding (8b/10b up to 5 GT/s, 128b/130b at 8 to 32 GT/s, 242/256 flits at 64 GT/s) / 8, per hop.")
	pcieLinkDegraded = newFamily("pcie", "pcie_link_degraded",
		"1 if the link trained below what both its ends support, else 0, per link of the NIC's path.",
		Gauge, "device", "hop", "pci_address").documented("1 if the link trained below what both its ends can do (current speed or width below the lower of the two ends' maximum), else 0. A link joins an even hop (the NIC, or a switch's upstream port) to the port above it, the next hop.")
	pcieAERErrors = newFamily("pcie", "pcie_aer_errors_total",
		"PCIe AER errors by class and name per hop of the NIC's path, from sysfs aer_dev_{correctable,nonfatal,fatal}.",
		Counter, "device", "hop", "pci_address", "class", "error").documented("PCIe Advanced Error Reporting errors by class (correctable, nonfatal, fatal) and error name, as the kernel lists them in aer_dev_correctable, aer_dev_nonfatal and aer_dev_fatal (totals left out), per hop of the NIC's path that has AER.")
	pcieRxQueueRemote = newFamily("pcie", "pcie_rx_queue_numa_remote_ratio",
		"Share of the CPUs the RX queue's IRQ runs on that are on another NUMA node than the NIC.",
		Gauge, "device", "queue", "irq").documented("Share of the CPUs the RX queue's IRQ runs on (/proc/irq/N/effective_affinity_list) that are on another NUMA node than the NIC: 0 all local, 1 all remote. Only for NICs with a NUMA node; xdp_netdev_irq_affinity_info names the CPUs.")
	pcieRxQueueInterrupts = newFamily("pcie", "pcie_rx_queue_interrupts_total",
		"Interrupts of the RX queue's IRQ summed over CPUs, from /proc/interrupts.",
		Counter, "device", "queue", "irq").documented("Interrupts of the RX queue's MSI-X vector, summed over CPUs (its row of /proc/interrupts). Divided into the queue's packet rate it is packets per interrupt, which interrupt coalescing (xdp_nic_coalesce_*) sets. For queues whose IRQ the netdev family names (Linux 6.8+ and a driver that links its queues to NAPIs) or the driver's IRQ name gives.")
	pcieCPUInfo = newFamily("pcie", "pcie_cpu_info",
		"The NUMA node of each CPU, from sysfs devices/system/node, on hosts of several nodes with a NIC on one; always 1.",
		Gauge, "cpu", "numa_node").documented("The NUMA node of each CPU (sysfs devices/system/node/nodeN/cpulist), on hosts of more than one node where a NIC has a node. A CPU is remote from a NIC when its numa_node differs from the NIC's in xdp_pcie_device_info: the recording rules join the two for the share of packets processed remotely.")
)

// PCIeConfig configures the pcie collector.
type PCIeConfig struct {
	// SysFS is the sysfs mount; /sys when empty.
	SysFS string
	// ProcFS is the procfs mount point, for irq/N/effective_affinity_list;
	// /proc when empty.
	ProcFS string
	// Filter's devices are the network devices whose PCI functions are
	// read.
	Filter
}

type pcieCollector struct {
	cfg    PCIeConfig
	logger *slog.Logger
	// netdev is the netdev generic netlink family, for queue -> NAPI ->
	// IRQ; nil where the kernel has none.
	netdev     netdev.Reader
	interrupts irq.Interrupts
}

func NewPCIeCollector(cfg PCIeConfig, logger *slog.Logger) (Collector, error) {
	cfg.SysFS = sysRoot(cfg.SysFS)
	cfg.ProcFS = procRoot(cfg.ProcFS)
	if err := pci.CheckBus(cfg.SysFS); err != nil {
		return nil, err
	}
	c := &pcieCollector{cfg: cfg, logger: logger}
	// Without the family the drivers' IRQ names stand in.
	if r, err := netdev.Dial(); err == nil {
		c.netdev = r
	}
	return c, nil
}

func (c *pcieCollector) Close() error { return nil }

func (c *pcieCollector) Update(ctx context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	links, err := snap.Get()
	if links == nil {
		return err
	}
	errs := []error{err}
	type found struct {
		link Link
		nic  *pci.NIC
	}
	var nics []found
	numa := false
	for _, l := range links.All() {
		if err := ctx.Err(); err != nil {
			return errors.Join(append(errs, err)...)
		}
		if !c.cfg.Devices.selects(l.Label) {
			continue
		}
		nic, err := pci.ReadNIC(c.cfg.SysFS, l.Name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a device without a PCI function (veth, lo, a bridge)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", l.Label, err))
			if nic == nil {
				continue
			}
		}
		nics = append(nics, found{l, nic})
		numa = numa || nic.NUMANode >= 0
	}
	// The CPUs' nodes matter only for a NIC with a node (a host without
	// one reads none); the queues' IRQs for that and for their interrupt
	// counts.
	var nodes pci.NodeCPUs
	if numa {
		if nodes, err = pci.ReadNodeCPUs(c.cfg.SysFS); err != nil {
			errs = append(errs, err)
		}
	}
	counting := c.cfg.Families.keeps(pcieRxQueueInterrupts)
	var irqs map[netdev.QueueKey]uint32
	if (numa || counting) && c.netdev != nil {
		// Kernels or drivers that do not report a queue's IRQ leave
		// the map empty: the drivers' IRQ names stand in.
		irqs, _ = netdev.RxQueueIRQs(c.netdev)
	}
	queues := make([][]pci.QueueIRQ, len(nics))
	var all []uint32
	for i, f := range nics {
		if f.nic.NUMANode >= 0 || counting {
			queues[i] = pci.RxQueueIRQs(filepath.Join(c.cfg.ProcFS, "irq"), f.nic, f.link.Index, f.link.Name, irqs)
		}
		for _, q := range queues[i] {
			all = append(all, q.IRQ)
		}
	}
	var counts map[uint32]uint64
	if counting && len(all) > 0 {
		if counts, err = c.interrupts.Counts(c.cfg.ProcFS, all); err != nil {
			errs = append(errs, err)
		}
	}
	for i, f := range nics {
		c.emit(ch, f.link, f.nic)
		c.emitQueues(ch, f.link.Label, f.nic, nodes, queues[i], counts)
	}
	if nodes.Count > 1 {
		for cpu, node := range nodes.Node {
			c.cfg.Families.send(ch, pcieCPUInfo, 1, strconv.Itoa(cpu), strconv.Itoa(node))
		}
	}
	return errors.Join(errs...)
}

func (c *pcieCollector) emit(ch chan<- prometheus.Metric, l Link, nic *pci.NIC) {
	dev := l.Label
	c.cfg.Families.send(ch, pcieDeviceInfo, 1, dev, nic.Address, strconv.Itoa(nic.NUMANode))
	for hop, h := range nic.Hops {
		hopLabel := strconv.Itoa(hop)
		if h.Speed > 0 {
			c.cfg.Families.send(ch, pcieLinkSpeed, h.Speed*1e9, dev, hopLabel, h.Address)
		}
		if h.MaxSpeed > 0 {
			c.cfg.Families.send(ch, pcieLinkMaxSpeed, h.MaxSpeed*1e9, dev, hopLabel, h.Address)
		}
		if h.Width > 0 {
			c.cfg.Families.send(ch, pcieLinkWidth, float64(h.Width), dev, hopLabel, h.Address)
		}
		if h.MaxWidth > 0 {
			c.cfg.Families.send(ch, pcieLinkMaxWidth, float64(h.MaxWidth), dev, hopLabel, h.Address)
		}
		if bw := pci.LinkBandwidth(h.Speed, h.Width); bw > 0 {
			c.cfg.Families.send(ch, pcieLinkBandwidth, bw, dev, hopLabel, h.Address)
		}
		for _, e := range h.AER {
			c.cfg.Families.send(ch, pcieAERErrors, float64(e.Count), dev, hopLabel, h.Address, e.Type, e.Name)
		}
	}
	for hop := 0; hop < len(nic.Hops); hop += 2 {
		if degraded, known := pci.LinkDegraded(nic.Hops, hop); known {
			v := 0.0
			if degraded {
				v = 1
			}
			c.cfg.Families.send(ch, pcieLinkDegraded, v, dev, strconv.Itoa(hop), nic.Hops[hop].Address)
		}
	}
}

// emitQueues sends each RX queue's interrupt count and, for a NIC with a
// node, the share of its IRQ's CPUs that are remote.
func (c *pcieCollector) emitQueues(ch chan<- prometheus.Metric, dev string, nic *pci.NIC, nodes pci.NodeCPUs, queues []pci.QueueIRQ, counts map[uint32]uint64) {
	numa := nic.NUMANode >= 0 && len(nodes.Node) > 0
	for _, q := range queues {
		queue, irqLabel := strconv.Itoa(q.Queue), strconv.FormatUint(uint64(q.IRQ), 10)
		if n, ok := counts[q.IRQ]; ok {
			c.cfg.Families.send(ch, pcieRxQueueInterrupts, float64(n), dev, queue, irqLabel)
		}
		if !numa {
			continue
		}
		cpus, err := irq.EffectiveCPUs(c.cfg.ProcFS, q.IRQ)
		if err != nil || len(cpus) == 0 {
			continue // the IRQ was freed since it was listed
		}
		remote := 0
		for _, cpu := range cpus {
			if n, ok := nodes.Node[cpu]; ok && n != nic.NUMANode {
				remote++
			}
		}
		c.cfg.Families.send(ch, pcieRxQueueRemote, float64(remote)/float64(len(cpus)), dev, queue, irqLabel)
	}
}
