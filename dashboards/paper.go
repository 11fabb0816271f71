package dashboards

import (
	"math"
	"strconv"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/lab/paper"
)

// Selectors shared by the dashboards. $instance and $device are regex
// matchers so "All" (.*) and multi-value selections work.
const (
	selInst    = `cluster=~"$cluster",job=~"$job",instance=~"$instance"`
	selInstDev = selInst + `,device=~"$device"`
	ri         = `[$__rate_interval]`
)

func rate(metric, matchers string) string {
	return "rate(" + metric + "{" + matchers + "}" + ri + ")"
}

// scaling is the x and y target of one live series of a scaling figure:
// the CPUs (by "cpu") or RX queues (by "queue") carrying the rxq
// program's packets with the verdict, and their packet rate, at the
// steady points of a sweep (rules/lab.yml). read "" takes either mode.
func scaling(r recorded, refX, refY, by, action, read, name string) []target {
	m := selInst + `,action="` + action + `"`
	if read != "" {
		m += `,read="` + read + `"`
	}
	count, xName := r.steadyCPUs(), name+" cores"
	if by == "queue" {
		count, xName = r.steadyQueues(), name+" RX queues"
	}
	return []target{
		{refID: refX, expr: "sum(" + count + "{" + m + "})", legend: xName, axis: "x", series: name},
		{refID: refY, expr: "sum(" + r.actionSteady() + "{" + m + "}) / 1e6", legend: name, axis: "y", series: name},
	}
}

// rxCPUs keeps a per-CPU recorded series to the RX CPUs.
func rxCPUs(r recorded, series string) string {
	return series + "{" + selInst + "} and on (cluster, job, instance, cpu) " + r.rxCPU() + "{" + selInst + "}"
}

// csvTable renders a paper table as TestData CSV content; NaN cells are
// left empty (the paper has no point there). scale divides every value
// but the first column (pps -> Mpps).
func csvTable(header []string, rows [][]float64, scale float64) string {
	var b strings.Builder
	b.WriteString(strings.Join(header, ","))
	for _, r := range rows {
		b.WriteByte('\n')
		for i, v := range r {
			if i > 0 {
				b.WriteByte(',')
				v /= scale
			}
			if !math.IsNaN(v) {
				b.WriteString(strconv.FormatFloat(v, 'g', 6, 64))
			}
		}
	}
	return b.String()
}

const (
	exemptPerf   = "hardware perf counters (cycles, instructions, cache-references, cache-misses): the lab VM has no PMU"
	exemptRing   = "ethtool -g ring parameters: veth does not implement them"
	exemptPort   = "a port counter (xdp_nic_port_packets_total: eth-mac or the driver's): veth has no port"
	exemptPCIe   = "mlx5 outbound_pci_stalled_rd/wr: needs a PCIe NIC"
	exemptLink   = "PCIe link files and NUMA: the lab's devices are veths, and this VM's NIC sits on conventional PCI on one node"
	exemptPage   = "mlx5 page cache stats (rx_cache_*) or driver page_pool stats (rx_pp_*, CONFIG_PAGE_POOL_STATS): absent on veth in the lab kernel"
	exemptCQE    = "mlx5 CQE compression (rx_cqe_compress priv flag)"
	exemptRSS    = "an RSS indirection table (ethtool -x): veth has none"
	exemptIRQ    = "RX queue MSI-X vectors (/proc/interrupts): veth has no IRQ"
	exemptXSK    = "an AF_XDP socket and the kernel's AF_XDP socket diag (CONFIG_XDP_SOCKETS_DIAG), absent in the lab kernel"
	exemptXSKDef = "an AF_XDP socket through libxdp's default program, observed with fexit: this lab's kernel refuses tracing programs (the kernel matrix counts it on Debian's kernels)"
	exemptUnc    = "--collector.uncore on an Intel server CPU with uncore PMUs (docs/collectors/uncore.md): a VM has none"
)

// Axes of the figures, labelled as the paper's matplotlib code labels them.
var (
	coresAxis  = axis{label: "Number of cores", unit: "none", min: ptr(0.0), integer: true}
	queuesAxis = axis{label: "RX queues", unit: "none", min: ptr(0.0), integer: true}
)

func paperBoard(cfg Config) board {
	f0, f105 := 0.0, 105.0
	lab, std := recorded{cfg.Lab.RateWindow}, recorded{cfg.RateWindow}
	return board{
		uid:   "xdp-paper-figures",
		title: "XDP paper figures",
		file:  "xdp-paper-figures.json",
		description: "The XDP paper's (CoNEXT 2018) benchmark figures drawn live from xdp_exporter, with the paper's measured curves as " +
			"toggleable TestData reference series. Run the rxq collector with the verdict of the figure (--collector.rxq.action=drop|tx|redirect) and sweep the RX queues/cores.",
		references: true,
		rows: []row{
			{title: "Packet drop performance", tool: "xdp_rxq_info and mpstat during a sweep, plotted by hand", panels: []panel{
				{
					title: "Packet drop performance: Mpps vs cores",
					description: "Live: XDP_DROP packets/s counted by the rxq program (xdp_rxq_packets_total on devices with xdp_rxq_info{action=\"drop\"}) against the number of CPUs processing them, " +
						"for the program that does not touch packet data (no_touch) and the one that reads it (--collector.rxq.read, xdp_rxq_info{read=\"true\"}). " +
						"Each steady scrape is a point; a sweep over 1..N queues draws the curve. Reference (dashed): the paper's DPDK, XDP, Linux raw and conntrack drop rates (Mellanox ConnectX-5, 64-byte packets).",
					kind: kindXY, unit: "Mpps", min: &f0, width: 24, height: 10, xAxis: coresAxis, yLabel: "Mpps",
					targets: append(scaling(lab, "A", "B", "cpu", "drop", "false", "XDP_DROP no_touch (live)"),
						scaling(lab, "C", "D", "cpu", "drop", "true", "XDP_DROP read (live)")...),
					refs: []reference{{refID: "R", csv: csvTable([]string{"cores (paper)", "DPDK (paper)", "XDP (paper)", "Linux raw (paper)", "Linux conntrack (paper)"}, paper.Drop, 1e6)}},
				},
				{
					title: "CPU usage vs offered load",
					description: "Live: busy share (1 - idle) of the RX CPUs, from xdp_cpu_seconds_total, against the offered load: the port's received packets " +
						"(xdp_nic_port_packets_total: ethtool's eth-mac FramesReceivedOK, else the driver's port counter) or, without a physical port, the packets the rxq program saw. Reference (dashed): the paper's single-core XDP, Linux (iptables raw) and DPDK.",
					kind: kindXY, unit: "percent", min: &f0, max: &f105, width: 12, height: 10, yLabel: "CPU usage (%)",
					// The paper's xlim(0, 27): the panel's y max would apply to x too.
					xAxis: axis{label: "Offered load (Mpps)", unit: "none", min: ptr(0.0), max: ptr(27.0)},
					targets: []target{
						{refID: "A", expr: "sum(" + lab.offered() + "{" + selInst + "}) / 1e6", legend: "offered Mpps", axis: "x", series: "XDP (live)"},
						{refID: "B", expr: "100 * avg(" + lab.rxqCPUsBusy() + "{" + selInst + "})", legend: "XDP (live)", axis: "y", series: "XDP (live)"},
					},
					refs: []reference{{refID: "R", csv: csvTable([]string{"offered Mpps (paper)", "DPDK (paper)", "XDP (paper)", "Linux (paper)"}, paper.CPUUsage(), 1)}},
				},
				{
					title:       "Offered load as a share of the 64-byte line rate",
					description: "The port's received packets/s over what its link carries at 64-byte frames (ethtool link speed / 84 bytes on the wire), per device: the paper's generator offered 88-99 Mpps of the 148.8 Mpps a 100 Gbit/s port carries, so its highest points are 0.6-0.67 of line rate.",
					unit:        "percentunit", min: &f0, width: 12, height: 10, exempt: exemptPort,
					targets: []target{{refID: "A", expr: std.lineRate() + "{" + selInst + "}", legend: "{{device}}"}},
				},
				{
					title: "XDP_PASS overhead: Linux with and without an XDP program",
					description: "Live: packets/s the rxq program passed to the stack (--collector.rxq.action=pass) against its cores, and, with no XDP program on the device, the packets NAPI delivered to the stack " +
						"(xdp_napi_poll_work_sum) against the CPUs whose softnet processed them. Reference (dashed): the paper's iptables raw drop with and without an XDP_PASS program (about 300 kpps, 13 ns per packet).",
					kind: kindXY, unit: "Mpps", min: &f0, width: 12, height: 10, xAxis: coresAxis, yLabel: "Mpps",
					targets: append(scaling(lab, "A", "B", "cpu", "pass", "", "XDP_PASS (live)"),
						target{refID: "C", expr: "sum(" + lab.stackSteadyCPUs() + "{" + selInst + "})", legend: "Linux cores", axis: "x", series: "Linux, no XDP (live)"},
						target{refID: "D", expr: "sum(" + lab.stackSteadyRate() + "{" + selInst + "}) / 1e6", legend: "Linux, no XDP (live)", axis: "y", series: "Linux, no XDP (live)"}),
					refs: []reference{{refID: "R", csv: csvTable([]string{"cores (paper)", "Linux raw + XDP_PASS (paper)", "Linux raw (paper)"}, paper.Pass, 1e6)}},
				},
			}},
			{title: "Packet forwarding", tool: "xdp_rxq_info during a sweep, plotted by hand", panels: []panel{
				{
					title: "Packet forwarding: Mpps vs cores",
					description: "Live: packets the rxq program returned XDP_TX for (same NIC) and XDP_REDIRECT for (to another device through a devmap), against the cores processing them. " +
						"Reference (dashed): the paper's DPDK forwarding (different NIC), XDP_TX with RX ring 256 (same NIC) and XDP_REDIRECT with RX ring 256 (different NIC).",
					kind: kindXY, unit: "Mpps", min: &f0, width: 12, height: 10, xAxis: coresAxis, yLabel: "Mpps",
					targets: append(scaling(lab, "A", "B", "cpu", "tx", "", "XDP_TX (live)"), scaling(lab, "C", "D", "cpu", "redirect", "", "XDP_REDIRECT (live)")...),
					refs:    []reference{{refID: "R", csv: csvTable([]string{"cores (paper)", "DPDK different NIC (paper)", "XDP same NIC (paper)", "XDP different NIC (paper)"}, paper.Forward, 1e6)}},
				},
				{
					title: "XDP_TX vs XDP_REDIRECT: Mpps vs cores",
					description: "The paper's tx-test figure: XDP_TX (back out of the same NIC) against XDP_REDIRECT (out of another NIC) as the cores grow. Live: the rxq program with --collector.rxq.action=tx and =redirect. " +
						"Reference (dashed): the paper's XDP_TX with RX ring 256 and XDP_REDIRECT with RX ring 256.",
					kind: kindXY, unit: "Mpps", min: &f0, width: 12, height: 10, xAxis: coresAxis, yLabel: "Mpps",
					targets: append(scaling(lab, "A", "B", "cpu", "tx", "", "TX (live)"), scaling(lab, "C", "D", "cpu", "redirect", "", "REDIRECT (live)")...),
					refs:    []reference{{refID: "R", csv: csvTable([]string{"cores (paper)", "TX (paper)", "REDIRECT (paper)"}, paper.TXvsRedirect(), 1e6)}},
				},
			}},
			{title: "RXQ scaling", tool: "xdp_rxq_info, ethtool -g and perf stat", panels: []panel{
				{
					title:       "Per-RXQ and total Mpps",
					description: "Packets per second by RX queue as the rxq program counts them (xdp_rxq_info's rx_queue_index rows), and their sum.",
					unit:        "Mpps", min: &f0,
					targets: []target{
						{refID: "A", expr: "sum by (device, queue) (" + rate("xdp_rxq_packets_total", selInstDev) + ") / 1e6", legend: "{{device}} rxq {{queue}}"},
						{refID: "B", expr: "sum(" + rate("xdp_rxq_packets_total", selInstDev) + ") / 1e6", legend: "total"},
					},
				},
				ringPanel(),
				cacheMissPanel(std),
				ipcPanel(std),
				{
					title: "XDP_TX Mpps vs RX queues, by ring size",
					description: "Live: XDP_TX packets/s against the number of RX queues carrying them. Reference (dashed): the paper's XDP_TX with RX ring 1024, 512 and 256; " +
						"the 1024 curve flattens at 3 queues where cache misses start.",
					kind: kindXY, unit: "Mpps", min: &f0, xAxis: queuesAxis, yLabel: "Mpps",
					targets: scaling(lab, "A", "B", "queue", "tx", "", "XDP_TX (live)"),
					refs:    []reference{{refID: "R", csv: csvTable([]string{"RX queues (paper)", "ring 1024 (paper)", "ring 512 (paper)", "ring 256 (paper)"}, paper.TXRing, 1e6)}},
				},
				{
					title:       "Cache-miss % vs RX queues, by ring size",
					description: "Live: the worst cache-miss ratio among the RX CPUs against the number of RX queues. Reference (dashed): the paper's perf stat cache-miss % for XDP_TX with RX ring 1024, 512 and 256.",
					kind:        kindXY, unit: "percent", min: &f0, exempt: exemptPerf, xAxis: queuesAxis, yLabel: "% cache-miss",
					targets: []target{
						{refID: "A", expr: "max(" + lab.steadyQueues() + "{" + selInst + "})", legend: "RX queues", axis: "x", series: "cache-miss (live)"},
						{refID: "B", expr: "100 * max(" + lab.rxqCacheMiss() + "{" + selInst + "})", legend: "cache-miss (live)", axis: "y", series: "cache-miss (live)"},
					},
					refs: []reference{{refID: "R", csv: csvTable([]string{"RX queues (paper)", "ring 1024 (paper)", "ring 512 (paper)", "ring 256 (paper)"}, paper.TXCacheMiss, 1)}},
				},
			}},
			{title: "AF_XDP", tool: "ss --xdp / xdpsock statistics", panels: []panel{{
				title: "AF_XDP: frames libxdp's default program redirected, per queue",
				description: "Observe mode (--collector.rxq.observe) on a device where an AF_XDP application let libxdp load its default program (xsk_def_prog, a component of libxdp's dispatcher): " +
					"frames/s it redirected to the socket of each RX queue, and passed to the stack on queues without one. Beside the sockets' drops: what reached the socket's queue against what the socket lost.",
				unit: "ops", min: &f0, width: 12, exempt: exemptXSKDef,
				targets: []target{
					{refID: "A", expr: sumBy("device, queue, action", "xdp_rxq_component_packets_total", `name="xsk_def_prog",`+selInstDev), legend: "{{device}} q{{queue}} {{action}}"},
				},
			}, {
				title: "AF_XDP sockets: drops and ring events",
				description: "Per AF_XDP socket (device, queue, socket inode), from sock_diag XDP_DIAG_STATS: frames dropped for lack of room in the RX ring or UMEM, invalid descriptors, " +
					"a full RX ring and an empty fill ring (the application does not hand buffers back fast enough).",
				unit: "ops", min: &f0, width: 12, exempt: exemptXSK,
				targets: []target{
					{refID: "A", expr: sumBy("device, queue", "xdp_xsk_rx_dropped_total", selInstDev), legend: "{{device}} q{{queue}} rx dropped"},
					{refID: "B", expr: sumBy("device, queue", "xdp_xsk_rx_ring_full_total", selInstDev), legend: "{{device}} q{{queue}} rx ring full"},
					{refID: "C", expr: sumBy("device, queue", "xdp_xsk_rx_fill_ring_empty_descriptors_total", selInstDev), legend: "{{device}} q{{queue}} fill ring empty"},
					{refID: "D", expr: sumBy("device, queue", "", `__name__=~"xdp_xsk_(rx|tx)_invalid_descriptors_total",`+selInstDev), legend: "{{device}} q{{queue}} invalid descriptors"},
				},
			}}},
		},
	}
}

func ringPanel() panel {
	return panel{
		title:       "RX and TX ring size",
		description: "Descriptors per ring (ethtool -g). With many queues, large RX rings hold more packet memory than DDIO's share of the last-level cache: the paper's fix was 1024 -> 512 or 256.",
		unit:        "short", min: ptr(0.0), exempt: exemptRing,
		targets: []target{{refID: "A", expr: "xdp_nic_ring_descriptors{" + selInstDev + "}", legend: "{{device}} {{ring}}"}},
	}
}

func cacheMissPanel(r recorded) panel {
	return panel{
		title:       "Cache-miss ratio per RX CPU",
		description: "Last-level cache misses per reference on each CPU the rxq program runs on (perf stat -e cache-misses,cache-references). The paper's DDIO signature: some RX CPUs at 20-40% while others stay below 1%.",
		unit:        "percentunit", min: ptr(0.0), exempt: exemptPerf, runbook: AlertDDIOCacheMiss,
		targets: []target{{refID: "A", expr: rxCPUs(r, r.cacheMiss()), legend: "cpu {{cpu}}"}},
	}
}

func ipcPanel(r recorded) panel {
	return panel{
		title:       "Instructions per cycle per RX CPU",
		description: "IPC of each RX CPU (perf stat insn per cycle). It falls from ~2.8 to ~1.2 as cache misses rise.",
		unit:        "short", min: ptr(0.0), exempt: exemptPerf,
		targets: []target{{refID: "A", expr: rxCPUs(r, r.ipc()), legend: "cpu {{cpu}}"}},
	}
}
