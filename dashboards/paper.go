package dashboards

import (
	"math"
	"strconv"
	"strings"
)

// Selectors shared by the dashboards. $instance and $device are regex
// matchers so "All" (.*) and multi-value selections work.
const (
	selInst    = `instance=~"$instance"`
	selInstDev = `instance=~"$instance",device=~"$device"`
	ri         = `[$__rate_interval]`
	// activePPS is the rate above which a CPU or queue counts as
	// "processing XDP" in the figures (stray packets do not add a core).
	activePPS = "1000"
)

func rate(metric, matchers string) string {
	return "rate(" + metric + "{" + matchers + "}" + ri + ")"
}

// rxqAction restricts xdp_rxq_packets_total to devices where the rxq
// collector's program returns the given verdict (xdp_rxq_info{action}).
func rxqAction(action string) string {
	return rate("xdp_rxq_packets_total", selInstDev) +
		` and on (instance, device) xdp_rxq_info{` + selInstDev + `,action="` + action + `"}`
}

// cores counts the CPUs on which the rxq program processes packets with
// the given verdict: the x axis of the paper's scaling figures.
func cores(action string) string {
	return "count(sum by (cpu) (" + rxqAction(action) + ") > " + activePPS + ")"
}

func queues(action string) string {
	return "count(sum by (queue) (" + rxqAction(action) + ") > " + activePPS + ")"
}

func mpps(action string) string {
	return "sum(" + rxqAction(action) + ") / 1e6"
}

// rxCPUs keeps per-CPU series of CPUs on which the rxq program runs.
func rxCPUs(expr string) string {
	return expr + " and on (cpu) (sum by (cpu) (" + rate("xdp_rxq_packets_total", selInstDev) + ") > " + activePPS + ")"
}

// csvTable renders a seed table as TestData CSV content; NaN cells are
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

var nan = math.NaN()

// Seed tables (../shared/seeds/000_*.txt), the data behind the paper's
// matplotlib figures. The columns each figure plots are the ones its
// plotting code indexes.
var (
	// drop-test.pdf: DPDK rxonly run#2, XDP no_touch RX=512 with
	// rx_cqe_compress on, iptables raw and conntrack.
	seedDrop = [][]float64{
		{1, 43503636, 23863471, 5051787, 1819409},
		{2, 74380044, 45514709, 10226514, 3274018},
		{3, 97203856, 67796536, 15104793, 4713610},
		{4, 113876503, 88821307, 20075858, 6189412},
		{5, 115453781, 99357978, 24995919, 7497838},
		{6, nan, 108607056, 29443869, 8726498},
	}
	// drop-cpu.pdf: offered Mpps, %idle of the XDP and the Linux (iptables
	// raw) RX core; plotted as 100 - idle, XDP for the first 11 rows,
	// Linux for the first 7, DPDK always 100.
	seedCPUIdle = [][3]float64{
		{0, 100, 100}, {0.25, 93.0, 79.0}, {0.5, 88.3, 69.8}, {1, 80.4, 57.4}, {2, 71.1, 40.4},
		{3, 64.8, 29.2}, {5, 52.7, 0}, {10, 37.6, 0}, {15, 25.3, 0}, {20, 8.2, 0}, {24.8, 0, 0},
		{25, 0, 0}, {30, 0, 0}, {35, 0, 0}, {40, 0, 0}, {43, 0, 0},
	}
	// redirect-test.pdf: DPDK forward (different NIC), XDP_TX RX=256
	// (same NIC), XDP_REDIRECT RX=256 (different NIC).
	seedForward = [][]float64{
		{1, 21893094, 16900699, 8641197},
		{2, 26549320, 34850297, 16742325},
		{3, 38194032, 51884051, 25738189},
		{4, 40641805, 68953922, 34185239},
		{5, 51173067, 70164732, 41461874},
		{6, nan, 68744044, 46062737},
	}
	// XDP_TX by RX ring size, and perf stat -C0 cache-miss % of each run.
	seedTXRing = [][]float64{
		{1, 16230538, 17005709, 16900699},
		{2, 31226024, 33926316, 34850297},
		{3, 32344463, 45523114, 51884051},
		{4, 32604398, 50978970, 68953922},
		{5, 37494941, 50619968, 70164732},
		{6, 43230678, 52315564, 68744044},
	}
	seedTXCacheMiss = [][]float64{
		{1, 0.001, 0.001, 0.001},
		{2, 0.469, 0.004, 0.002},
		{3, 11.752, 1.159, 0.002},
		{4, 30.577, 4.868, 0.010},
		{5, 41.497, 13.544, 0.316},
		{6, 41.977, 22.498, 1.340},
	}
)

func seedCPUUsage() [][]float64 {
	out := make([][]float64, len(seedCPUIdle))
	for i, r := range seedCPUIdle {
		xdp, linux := 100-r[1], 100-r[2]
		if i >= 11 {
			xdp = nan
		}
		if i >= 7 {
			linux = nan
		}
		out[i] = []float64{r[0], 100, xdp, linux}
	}
	return out
}

const (
	exemptPerf = "hardware perf counters (cycles, instructions, cache-references, cache-misses): the lab VM has no PMU"
	exemptRing = "ethtool -g ring parameters: veth does not implement them"
	exemptPHY  = "physical-port counters (mlx5 rx_packets_phy, rx_discards_phy, rx_out_of_buffer): veth has no port"
	exemptPCIe = "mlx5 outbound_pci_stalled_rd/wr: needs a PCIe NIC"
	exemptPage = "mlx5 page cache stats (rx_cache_*) or driver page_pool stats (rx_pp_*, CONFIG_PAGE_POOL_STATS): absent on veth in the lab kernel"
	exemptCQE  = "mlx5 CQE compression (rx_cqe_compress priv flag)"
)

func paperBoard() board {
	f0, f100, f110 := 0.0, 100.0, 110.0
	return board{
		uid:   "xdp-paper-figures",
		title: "XDP paper figures",
		file:  "xdp-paper-figures.json",
		description: "The XDP paper's (CoNEXT 2018) benchmark figures drawn live from xdp_exporter, with the paper's measured curves as " +
			"toggleable TestData reference series. Run the rxq collector with the verdict of the figure (--collector.rxq.action=drop|tx|redirect) and sweep the RX queues/cores.",
		references: true,
		rows: []row{
			{title: "Packet drop performance", panels: []panel{{
				title: "Packet drop performance: Mpps vs cores",
				description: "Live: XDP_DROP packets/s counted by the rxq program (xdp_rxq_packets_total on devices with xdp_rxq_info{action=\"drop\"}) against the number of CPUs processing them. " +
					"Each scrape is a point; a sweep over 1..N queues draws the curve. Reference: the paper's DPDK, XDP, Linux raw and conntrack drop rates (Mellanox ConnectX-5, 64-byte packets).",
				kind: kindXY, unit: "Mpps", min: &f0, width: 24, height: 10,
				targets: []target{
					{refID: "A", expr: cores("drop"), legend: "cores", axis: "x", series: "XDP_DROP (live)"},
					{refID: "B", expr: mpps("drop"), legend: "XDP_DROP (live)", axis: "y", series: "XDP_DROP (live)"},
				},
				joins: []string{"A|B"},
				refs:  []reference{{refID: "R", csv: csvTable([]string{"cores", "DPDK (paper)", "XDP (paper)", "Linux raw (paper)", "Linux conntrack (paper)"}, seedDrop, 1e6)}},
			}}},
			{title: "CPU usage vs offered load", panels: []panel{{
				title: "CPU usage vs offered load",
				description: "Live: busy share (1 - idle) of the RX CPUs, from xdp_cpu_seconds_total, against the offered load: the port's received packets " +
					"(xdp_ethtool_phy_packets_total, mlx5) or, without a physical port, the packets the rxq program saw. Reference: the paper's single-core XDP, Linux (iptables raw) and DPDK.",
				kind: kindXY, unit: "percent", min: &f0, max: &f110, width: 24, height: 10,
				targets: []target{
					{refID: "A", expr: "(sum(" + rate("xdp_ethtool_phy_packets_total", selInstDev+`,direction="rx"`) + ") or sum(" + rate("xdp_rxq_packets_total", selInstDev) + ")) / 1e6",
						legend: "offered Mpps", axis: "x", series: "XDP (live)"},
					{refID: "B", expr: "100 * (1 - avg(" + rxCPUs("sum by (cpu) ("+rate("xdp_cpu_seconds_total", selInst+`,mode="idle"`)+") / sum by (cpu) ("+rate("xdp_cpu_seconds_total", selInst)+")") + "))",
						legend: "XDP (live)", axis: "y", series: "XDP (live)"},
				},
				joins: []string{"A|B"},
				refs:  []reference{{refID: "R", csv: csvTable([]string{"Mpps", "DPDK (paper)", "XDP (paper)", "Linux (paper)"}, seedCPUUsage(), 1)}},
			}}},
			{title: "Packet forwarding", panels: []panel{{
				title: "Packet forwarding: Mpps vs cores",
				description: "Live: packets the rxq program returned XDP_TX for (same NIC) and XDP_REDIRECT for (to another device through a devmap), against the cores processing them. " +
					"Reference: the paper's DPDK forwarding (different NIC), XDP_TX with RX ring 256 (same NIC) and XDP_REDIRECT with RX ring 256 (different NIC).",
				kind: kindXY, unit: "Mpps", min: &f0, width: 24, height: 10,
				targets: []target{
					{refID: "A", expr: cores("tx"), legend: "cores", axis: "x", series: "XDP_TX (live)"},
					{refID: "B", expr: mpps("tx"), legend: "XDP_TX (live)", axis: "y", series: "XDP_TX (live)"},
					{refID: "C", expr: cores("redirect"), legend: "cores", axis: "x", series: "XDP_REDIRECT (live)"},
					{refID: "D", expr: mpps("redirect"), legend: "XDP_REDIRECT (live)", axis: "y", series: "XDP_REDIRECT (live)"},
				},
				joins: []string{"A|B", "C|D"},
				refs:  []reference{{refID: "R", csv: csvTable([]string{"cores", "DPDK different NIC (paper)", "XDP same NIC (paper)", "XDP different NIC (paper)"}, seedForward, 1e6)}},
			}}},
			{title: "RXQ scaling", panels: []panel{
				{
					title:       "Per-RXQ and total Mpps",
					description: "Packets per second by RX queue as the rxq program counts them (xdp_rxq_info's rx_queue_index rows), and their sum.",
					unit:        "Mpps", min: &f0,
					targets: []target{
						{refID: "A", expr: "sum by (device, queue) (" + rate("xdp_rxq_packets_total", selInstDev) + ") / 1e6", legend: "{{device}} rxq {{queue}}"},
						{refID: "B", expr: "sum(" + rate("xdp_rxq_packets_total", selInstDev) + ") / 1e6", legend: "total"},
					},
				},
				{
					title:       "RX and TX ring size",
					description: "Descriptors per ring (ethtool -g). With many queues, large RX rings hold more packet memory than DDIO's share of the last-level cache: the paper's fix was 1024 -> 512 or 256.",
					unit:        "short", min: &f0, exempt: exemptRing,
					targets: []target{{refID: "A", expr: "xdp_ethtool_ring_descriptors{" + selInstDev + "}", legend: "{{device}} {{ring}}"}},
				},
				{
					title:       "Cache-miss ratio per RX CPU",
					description: "Last-level cache misses per reference on each CPU the rxq program runs on (perf stat -e cache-misses,cache-references). The paper's DDIO signature: some RX CPUs at 20-40% while others stay below 1%.",
					unit:        "percentunit", min: &f0, exempt: exemptPerf,
					targets: []target{{refID: "A", expr: rxCPUs("sum by (cpu) (" + rate("xdp_perf_cache_misses_total", selInst) + ") / sum by (cpu) (" + rate("xdp_perf_cache_references_total", selInst) + ")"), legend: "cpu {{cpu}}"}},
				},
				{
					title:       "Instructions per cycle per RX CPU",
					description: "IPC of each RX CPU (perf stat insn per cycle). It falls from ~2.8 to ~1.2 as cache misses rise.",
					unit:        "short", min: &f0, exempt: exemptPerf,
					targets: []target{{refID: "A", expr: rxCPUs("sum by (cpu) (" + rate("xdp_perf_instructions_total", selInst) + ") / sum by (cpu) (" + rate("xdp_perf_cycles_total", selInst) + ")"), legend: "cpu {{cpu}}"}},
				},
				{
					title: "XDP_TX Mpps vs RX queues, by ring size",
					description: "Live: XDP_TX packets/s against the number of RX queues carrying them. Reference: the paper's XDP_TX with RX ring 1024, 512 and 256; " +
						"the 1024 curve flattens at 3 queues where cache misses start.",
					kind: kindXY, unit: "Mpps", min: &f0,
					targets: []target{
						{refID: "A", expr: queues("tx"), legend: "RX queues", axis: "x", series: "XDP_TX (live)"},
						{refID: "B", expr: mpps("tx"), legend: "XDP_TX (live)", axis: "y", series: "XDP_TX (live)"},
					},
					joins: []string{"A|B"},
					refs:  []reference{{refID: "R", csv: csvTable([]string{"RX queues", "ring 1024 (paper)", "ring 512 (paper)", "ring 256 (paper)"}, seedTXRing, 1e6)}},
				},
				{
					title:       "Cache-miss % vs RX queues, by ring size",
					description: "Live: the worst cache-miss ratio among the RX CPUs against the number of RX queues. Reference: the paper's perf stat cache-miss % for XDP_TX with RX ring 1024, 512 and 256.",
					kind:        kindXY, unit: "percent", min: &f0, max: &f100, exempt: exemptPerf,
					targets: []target{
						{refID: "A", expr: "count(sum by (queue) (" + rate("xdp_rxq_packets_total", selInstDev) + ") > " + activePPS + ")", legend: "RX queues", axis: "x", series: "cache-miss (live)"},
						{refID: "B", expr: "100 * max(" + rxCPUs("sum by (cpu) ("+rate("xdp_perf_cache_misses_total", selInst)+") / sum by (cpu) ("+rate("xdp_perf_cache_references_total", selInst)+")") + ")",
							legend: "cache-miss (live)", axis: "y", series: "cache-miss (live)"},
					},
					joins: []string{"A|B"},
					refs:  []reference{{refID: "R", csv: csvTable([]string{"RX queues", "ring 1024 (paper)", "ring 512 (paper)", "ring 256 (paper)"}, seedTXCacheMiss, 1)}},
				},
			}},
		},
	}
}
