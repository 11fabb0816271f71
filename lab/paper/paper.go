// Package paper holds the measurements behind the XDP paper's (CoNEXT 2018)
// figures, from the paper's benchmark notes: the dashboards draw them as
// reference curves and xdp-lab sweep beside its own. Rates are packets per
// second; NaN is a cell the paper has no value for.
package paper

import "math"

var nan = math.NaN()

// The benchmark notes' tables, the data behind the paper's
// matplotlib figures. The columns each figure plots are the ones its
// plotting code indexes.
var (
	// Drop is drop-test.pdf: cores, DPDK rxonly run#2, XDP no_touch RX=512 with
	// rx_cqe_compress on, iptables raw and conntrack.
	Drop = [][]float64{
		{1, 43503636, 23863471, 5051787, 1819409},
		{2, 74380044, 45514709, 10226514, 3274018},
		{3, 97203856, 67796536, 15104793, 4713610},
		{4, 113876503, 88821307, 20075858, 6189412},
		{5, 115453781, 99357978, 24995919, 7497838},
		{6, nan, 108607056, 29443869, 8726498},
	}
	// drop-cpu.pdf's data: offered Mpps, %idle of the XDP and the Linux
	// (iptables raw) RX core; see CPUUsage.
	cpuIdle = [][3]float64{
		{0, 100, 100}, {0.25, 93.0, 79.0}, {0.5, 88.3, 69.8}, {1, 80.4, 57.4}, {2, 71.1, 40.4},
		{3, 64.8, 29.2}, {5, 52.7, 0}, {10, 37.6, 0}, {15, 25.3, 0}, {20, 8.2, 0}, {24.8, 0, 0},
		{25, 0, 0}, {30, 0, 0}, {35, 0, 0}, {40, 0, 0}, {43, 0, 0},
	}
	// Forward is redirect-test.pdf: cores, DPDK forward (different NIC), XDP_TX RX=256
	// (same NIC), XDP_REDIRECT RX=256 (different NIC).
	Forward = [][]float64{
		{1, 21893094, 16900699, 8641197},
		{2, 26549320, 34850297, 16742325},
		{3, 38194032, 51884051, 25738189},
		{4, 40641805, 68953922, 34185239},
		{5, 51173067, 70164732, 41461874},
		{6, nan, 68744044, 46062737},
	}
	// TXRing is XDP_TX by RX ring size (RX queues; ring 1024, 512, 256), and
	// TXCacheMiss the perf stat -C0 cache-miss % of each run.
	TXRing = [][]float64{
		{1, 16230538, 17005709, 16900699},
		{2, 31226024, 33926316, 34850297},
		{3, 32344463, 45523114, 51884051},
		{4, 32604398, 50978970, 68953922},
		{5, 37494941, 50619968, 70164732},
		{6, 43230678, 52315564, 68744044},
	}
	// Pass is the XDP_PASS overhead: cores, iptables raw drop with and
	// without an xdp_rxq_info XDP_PASS program on the RX queues.
	Pass = [][]float64{
		{1, 4545188, 4837269},
		{2, 9069234, 9661542},
		{3, 13596920, 14483976},
		{4, 18081421, 19250649},
		{5, 22520733, 24070686},
		{6, 27002648, 28817001},
	}
	TXCacheMiss = [][]float64{
		{1, 0.001, 0.001, 0.001},
		{2, 0.469, 0.004, 0.002},
		{3, 11.752, 1.159, 0.002},
		{4, 30.577, 4.868, 0.010},
		{5, 41.497, 13.544, 0.316},
		{6, 41.977, 22.498, 1.340},
	}
)

// TXvsRedirect is tx-test.pdf: XDP_TX with RX ring 256 (tx[:,1]) and
// XDP_REDIRECT with RX ring 256 (redir[:,3]).
func TXvsRedirect() [][]float64 {
	out := make([][]float64, len(TXRing))
	for i := range TXRing {
		out[i] = []float64{TXRing[i][0], TXRing[i][3], Forward[i][3]}
	}
	return out
}

// CPUUsage is drop-cpu.pdf: offered Mpps against the busy percent (100 -
// mpstat %idle) of DPDK (always 100), the XDP RX core (first 11 rows) and
// the Linux (iptables raw) RX core (first 7 rows).
func CPUUsage() [][]float64 {
	out := make([][]float64, len(cpuIdle))
	for i, r := range cpuIdle {
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
