package collector

import (
	"regexp"
	"sort"
)

// Label is what one label name means: the same in every family that has
// it (docs/dev/metrics-design.md, "Labels identify what is counted").
type Label struct {
	Name    string
	Meaning string
	// Values is the regular expression every value matches, whole; empty
	// where the kernel, a driver or the user names the values (a device,
	// a program, a driver's firmware version).
	Values string
	re     *regexp.Regexp
}

// Matches reports whether v is a value the label can have.
func (l *Label) Matches(v string) bool { return l.re == nil || l.re.MatchString(v) }

// number is a decimal id or count as the kernel prints it.
const number = `[0-9]+`

var glossary = map[string]*Label{}

func label(name, meaning, values string) {
	l := &Label{Name: name, Meaning: meaning, Values: values}
	if values != "" {
		l.re = regexp.MustCompile(`^(?:` + values + `)$`)
	}
	glossary[name] = l
}

func init() {
	label("action", "The XDP verdict a program returned (enum xdp_action).", `aborted|drop|pass|tx|redirect|unknown`)
	label("allowance", "The cloud allowance an instance exceeded (ENA).", `bw_in|bw_out|pps|conntrack|linklocal`)
	label("attach_mode", "How an XDP program is attached: in the driver, on the skb path or on the NIC.", `native|generic|offload`)
	label("autoneg", "Whether the link's speed and duplex are negotiated.", `on|off`)
	label("bus_info", "The bus address the driver reports (ethtool -i bus-info).", "")
	label("chain_call_actions", "The verdicts after which libxdp's dispatcher runs the next component, comma-separated.", "")
	label("channel", "A kind of NIC channel (ethtool -l).", `rx|tx|other|combined`)
	label("class", "The class of a PCIe AER error, as sysfs files them.", `correctable|nonfatal|fatal`)
	label("collector", "The exporter's collector that sent the series.", `[a-z]+`)
	label("context", "Where a NAPI poll ran: from an interrupt's softirq (other), on an idle CPU, in ksoftirqd or in a threaded NAPI's kthread.", `other|idle|ksoftirqd|threaded`)
	label("cpu", "A CPU's number, as /proc/stat and sysfs number it.", number)
	label("cpus", "The CPUs an IRQ may run on (smp_affinity_list), as the kernel prints a CPU list.", `[0-9,-]+`)
	label("device", "A network interface, named as the Devices section says; absent for a drop the kernel gives no device and a page pool whose device is gone.", "")
	label("direction", "A device's receive (rx) or transmit (tx) side.", `rx|tx`)
	label("dispatcher_id", "The BPF program id of libxdp's dispatcher.", number)
	label("driver", "The interface's driver (ethtool -i driver).", "")
	label("duplex", "The link's duplex.", `full|half|unknown`)
	label("effective_cpus", "The CPUs an IRQ does run on (effective_affinity_list), as the kernel prints a CPU list.", `[0-9,-]+`)
	label("encoding", "The FEC encoding on the link (ethtool --show-fec).", `off|rs|baser|llrs`)
	label("errno", "The error a failed XDP redirect returned, by its errno name.", `E[A-Z0-9]+|[0-9]+`)
	label("error", "The name of a PCIe AER error, as the kernel lists it.", `[A-Za-z]+`)
	label("event", "The event counted or probed: a page-cache event of the driver, a perf or uncore event.", `[a-z0-9_.:-]+`)
	label("family", "The family of the series that an info series describes.", `xdp_[a-z0-9_]+`)
	label("feature", "A feature of the device as netdev netlink names it.", `[a-z0-9-]+`)
	label("fields", "The header fields a NIC hashes, as ethtool -n's letters.", `[a-zA-Z]*`)
	label("firmware_version", "The firmware version the driver reports (ethtool -i).", "")
	label("flag", "A driver private flag (ethtool --show-priv-flags).", "")
	label("flow", "Which way an IIO port's bytes went: to the CPU (in) or from it (out).", `in|out`)
	label("flow_type", "A flow type of RSS hashing (ethtool -n rx-flow-hash).", `[a-z0-9]+`)
	label("from_device", "The interface an XDP program redirected from.", "")
	label("group", "A group of perf events counted together.", `[a-z0-9_]+`)
	label("hash_function", "The RSS hash function (ethtool -x).", `[a-z0-9_]+`)
	label("hook", "The traffic-control hook a BPF program is on: tc and tcx ingress or egress, netkit primary or peer.", `ingress|egress|primary|peer`)
	label("hop", "The place of a PCIe function on the NIC's path to the root: 0 the NIC, odd the port above a link.", number)
	label("iio", "An IIO stack (a PCIe root complex) of a socket.", number)
	label("inode", "An AF_XDP socket's inode, as ss and /proc/net/xdp name it.", number)
	label("irq", "An interrupt's number, as /proc/interrupts numbers it; absent where the driver links the queue to none.", number)
	label("kind", "The kind of traffic-control attachment of a BPF program.", `tc|tcx|netkit`)
	label("link_id", "The id of the bpf_link holding a program; absent without one.", number)
	label("map", "A map of the exporter's BPF programs.", `[a-z_]+`)
	label("map_id", "A BPF map's id.", number)
	label("mode", "A CPU's mode in /proc/stat, as node_exporter's node_cpu_seconds_total names it.", `user|nice|system|idle|iowait|irq|softirq|steal`)
	label("name", "A BPF program's name.", "")
	label("napi_id", "A NAPI instance's id (netdev netlink); absent where the kernel names none.", number)
	label("numa_node", "A NUMA node's number; -1 where the platform gives none.", `-1|[0-9]+`)
	label("op", "A PCIe or memory operation: read or write.", `read|write`)
	label("order", "A program's place in its hook's run order, from 0.", number)
	label("path", "The path a page allocation took in the driver's page cache or page_pool.", `fast|slow|slow_high_order|empty|refill|waive`)
	label("pci_address", "A PCI function's address (domain:bus:device.function).", `[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]`)
	label("pid", "The PID of a threaded NAPI's kernel thread.", number)
	label("pmu", "An uncore PMU kind.", `[a-z_]+`)
	label("pool_id", "A page_pool's id (netdev netlink).", number)
	label("port", "A port of an IIO stack.", number)
	label("priority", "A component's run priority in libxdp's dispatcher.", `-?[0-9]+`)
	label("prog_id", "A BPF program's id.", number)
	label("queue", "A queue's index on its device; absent where a family is summed over queues.", number)
	label("read", "Whether the rxq program reads packet data before its verdict.", `true|false`)
	label("reason", "Why a packet was dropped or a thing could not be done, in the kernel's words (enum skb_drop_reason without its prefix) or the exporter's.", `[A-Za-z0-9_]+`)
	label("request", "A kind of memory request the uncore counts.", `[a-z_]+`)
	label("result", "The outcome of what is counted: a page recycle, a FEC block, a DDIO lookup.", `[a-z_]+`)
	label("ring", "A descriptor ring of a NIC queue or an AF_XDP socket.", `rx|tx|rx_mini|rx_jumbo|fill|completion`)
	label("root_bus", "The PCI bus at the root of an IIO stack.", `[0-9a-f]{4}:[0-9a-f]{2}`)
	label("size", "A frame-size range of a PHY counter.", `[0-9]+(_to_[0-9]+|_or_more)?`)
	label("slot", "A component's slot in libxdp's dispatcher.", number)
	label("socket", "A CPU socket (package).", number)
	label("source", "Where a value is read from.", `sysctl|exporter|ethtool|eth_mac|netdev_qstats|link_stats64`)
	label("stat", "The counters a value is read from, comma-separated.", "")
	label("table_size", "The RSS indirection table's entries.", number)
	label("tag", "A BPF program's tag (the hash of its instructions).", `[0-9a-f]{16}`)
	label("to_cpu", "The CPU a cpumap redirect queued to.", number)
	label("to_device", "The interface an XDP program redirected to.", "")
	label("tracepoint", "A kernel tracepoint the exporter attaches to.", `[a-z_]+:[a-z_]+`)
	label("transaction", "Who started an IIO transaction: a device (inbound) or a CPU (outbound).", `inbound|outbound`)
	label("vector", "A softirq vector, as /proc/softirqs names it.", `HI|TIMER|NET_TX|NET_RX|BLOCK|IRQ_POLL|TASKLET|SCHED|HRTIMER|RCU`)
	label("version", "The driver's version (ethtool -i).", "")
	label("where", "Where the NIC dropped a packet for lack of host resources: at the port or at an RX ring; absent where the source does not say.", `port|ring`)
}

// Glossary is every label's meaning, sorted by name.
func Glossary() []*Label {
	out := make([]*Label, 0, len(glossary))
	for _, l := range glossary {
		out = append(out, l)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LabelMeaning is the glossary's entry for name, or nil.
func LabelMeaning(name string) *Label { return glossary[name] }
