package top

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"

	dto "github.com/prometheus/client_model/go"
)

var posInf = math.Inf(1)

// View names, in the order of the keys that select them.
var Views = []string{"overview", "rxq", "xdp", "napi", "nic", "cpu", "drop"}

// Render draws one view of the change between two scrapes of one
// endpoint, limited to devices matching filter (a substring; empty: all).
func Render(view string, prev, cur *Scrape, filter string) string {
	return RenderRows(view, prev, cur, filter, 0)
}

// RenderRows is Render for a screen of rows lines: the nic view, which can
// list thousands of stats, formats only those (0: all).
func RenderRows(view string, prev, cur *Scrape, filter string, rows int) string {
	if prev == nil || cur == nil {
		return "waiting for a second scrape to compute rates\n"
	}
	v := viewCtx{prev: prev, cur: cur, filter: filter, rows: rows}
	switch view {
	case "rxq":
		return v.rxq()
	case "xdp":
		return v.xdp()
	case "napi":
		return v.napi()
	case "nic":
		return v.nic()
	case "cpu":
		return v.cpu()
	case "drop":
		return v.drop()
	default:
		return v.overview()
	}
}

type viewCtx struct {
	prev, cur *Scrape
	filter    string
	rows      int
}

func (v viewCtx) rates(family string) []Series {
	var out []Series
	for _, s := range Rates(v.prev, v.cur, family) {
		if v.selects(s) {
			out = append(out, s)
		}
	}
	return out
}

// selects applies the device filter to a series with a device label.
func (v viewCtx) selects(s Series) bool {
	if v.filter == "" {
		return true
	}
	for _, l := range []string{"device", "from_device", "to_device"} {
		if d, ok := s.Labels[l]; ok {
			return strings.Contains(d, v.filter)
		}
	}
	return true
}

// table writes tab-separated rows aligned.
type table struct {
	buf bytes.Buffer
	w   *tabwriter.Writer
}

func newTable() *table {
	t := &table{}
	t.w = tabwriter.NewWriter(&t.buf, 0, 0, 2, ' ', 0)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.w, strings.Join(cells, "\t")) }

func (t *table) String() string {
	t.w.Flush()
	return t.buf.String()
}

// pps renders a rate with thousands separators, as xdp_rxq_info does.
func pps(r float64) string {
	n := int64(math.Round(r))
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 && c != '-' && s[i-1] != '-' {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	return b.String()
}

func needs(collector, family string) string {
	return fmt.Sprintf("no %s in the scrape: run the exporter with --collector.%s\n", family, collector)
}

func sum(ss []Series) float64 {
	var t float64
	for _, s := range ss {
		t += s.Value
	}
	return t
}

// byLabels sums series by the given labels and returns the groups sorted
// by those labels (numerically where they are numbers).
func byLabels(ss []Series, labels ...string) []Series {
	groups := map[string]*Series{}
	var keys []string
	for _, s := range ss {
		l := map[string]string{}
		var k []string
		for _, n := range labels {
			l[n] = s.Labels[n]
			k = append(k, s.Labels[n])
		}
		id := strings.Join(k, "\x00")
		g, ok := groups[id]
		if !ok {
			g = &Series{Labels: l}
			groups[id] = g
			keys = append(keys, id)
		}
		g.Value += s.Value
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	out := make([]Series, len(keys))
	for i, k := range keys {
		out[i] = *groups[k]
	}
	return out
}

// lessKey orders NUL-joined label values, numbers by value.
func lessKey(a, b string) bool {
	as, bs := strings.Split(a, "\x00"), strings.Split(b, "\x00")
	for i := range as {
		if as[i] == bs[i] {
			continue
		}
		x, errx := strconv.ParseFloat(as[i], 64)
		y, erry := strconv.ParseFloat(bs[i], 64)
		if errx == nil && erry == nil {
			return x < y
		}
		return as[i] < bs[i]
	}
	return false
}

// rxq is xdp_rxq_info's layout: XDP-RX pps per CPU and total, then
// RXQ:CPU pairs, with issue pps beside them.
func (v viewCtx) rxq() string {
	pkts := v.rates("xdp_rxq_packets_total")
	if !v.cur.Has("xdp_rxq_packets_total") {
		return v.rxqFallback()
	}
	t := newTable()
	t.row("source: rxq collector (xdp_rxq_packets_total)")
	issues := sum(v.rates("xdp_rxq_issues_total"))
	// The pcie collector says which CPUs are on another NUMA node than
	// the NIC: DDIO put the packets in the other socket's cache.
	remote := map[[2]string]bool{}
	for _, s := range v.cur.Values("xdp_pcie_cpu_numa_remote") {
		remote[[2]string{s.Labels["device"], s.Labels["cpu"]}] = s.Value == 1
	}
	for _, dev := range byLabels(pkts, "device") {
		d := dev.Labels["device"]
		var mine []Series
		for _, s := range pkts {
			if s.Labels["device"] == d {
				mine = append(mine, s)
			}
		}
		t.row("Device", d)
		t.row("XDP stats", "CPU", "pps", "issue-pps")
		for _, c := range byLabels(mine, "cpu") {
			numa := ""
			if remote[[2]string{d, c.Labels["cpu"]}] {
				numa = "remote NUMA node"
			}
			t.row("XDP-RX CPU", c.Labels["cpu"], pps(c.Value), "", numa)
		}
		t.row("XDP-RX CPU", "total", pps(sum(mine)), pps(issues))
		t.row("")
		t.row("RXQ stats", "RXQ:CPU", "pps", "")
		for _, q := range byLabels(mine, "queue", "cpu") {
			t.row("rx_queue_index", q.Labels["queue"]+":"+q.Labels["cpu"], pps(q.Value), "")
		}
		for _, q := range byLabels(mine, "queue") {
			t.row("rx_queue_index", q.Labels["queue"]+":sum", pps(q.Value), "")
		}
		cpusOfQueue := map[string]int{}
		for _, q := range byLabels(mine, "queue", "cpu") {
			if q.Value > 0 {
				cpusOfQueue[q.Labels["cpu"]]++
			}
		}
		for _, c := range byLabels(mine, "cpu") {
			if n := cpusOfQueue[c.Labels["cpu"]]; n > 1 {
				t.row("!", fmt.Sprintf("CPU %s serves %d busy queues", c.Labels["cpu"], n))
			}
		}
	}
	return t.String()
}

// rxqFallback draws per-queue XDP packets from the driver's counters when
// the rxq collector is off.
func (v viewCtx) rxqFallback() string {
	for _, src := range []struct{ family, what string }{
		{"xdp_ethtool_rx_xdp_processed_packets_total", "the driver's per-queue XDP counters (ethtool collector)"},
		{"xdp_netdev_queue_rx_packets_total", "the netdev qstats per queue (netdev collector)"},
	} {
		if !v.cur.Has(src.family) {
			continue
		}
		rs := v.rates(src.family)
		t := newTable()
		t.row("source: " + src.what + "; --collector.rxq adds the per-CPU split")
		t.row("Device", "RXQ", "pps")
		for _, q := range byLabels(rs, "device", "queue") {
			t.row(q.Labels["device"], q.Labels["queue"], pps(q.Value))
		}
		for _, d := range byLabels(rs, "device") {
			t.row(d.Labels["device"], "total", pps(d.Value))
		}
		return t.String()
	}
	return needs("rxq", "xdp_rxq_packets_total")
}

// xdp is xdp_monitor's table.
func (v viewCtx) xdp() string {
	if !v.cur.Has("xdp_monitor_tracepoint_attached") {
		return needs("xdp", "xdp_monitor_tracepoint_attached")
	}
	t := newTable()
	t.row("XDP-event", "where", "pps", "drop-pps", "bulk-avg")
	for _, s := range byLabels(v.rates("xdp_exceptions_total"), "device", "action") {
		t.row("Exception", s.Labels["device"]+" "+s.Labels["action"], pps(s.Value), "", "")
	}
	for _, s := range byLabels(v.rates("xdp_redirect_errors_total"), "device", "errno") {
		t.row("Redirect-err", s.Labels["device"]+" "+s.Labels["errno"], pps(s.Value), "", "")
	}
	for _, s := range byLabels(v.rates("xdp_redirects_total"), "device") {
		t.row("Redirect", s.Labels["device"], pps(s.Value), "", "")
	}
	v.bulkRows(t, "devmap-xmit", "xdp_devmap_xmit", []string{"from_device", "to_device"}, func(l map[string]string) string {
		return l["from_device"] + "->" + l["to_device"]
	})
	v.bulkRows(t, "cpumap-enqueue", "xdp_cpumap_enqueue", []string{"map_id", "to_cpu"}, func(l map[string]string) string {
		return "map " + l["map_id"] + " ->cpu " + l["to_cpu"]
	})
	for _, s := range byLabels(v.rates("xdp_cpumap_kthread_packets_total"), "map_id", "cpu") {
		drops := lookup(byLabels(v.rates("xdp_cpumap_kthread_drops_total"), "map_id", "cpu"), s.Labels)
		t.row("cpumap-kthread", "map "+s.Labels["map_id"]+" cpu "+s.Labels["cpu"], pps(s.Value), pps(drops), "")
	}
	v.bulkRows(t, "xdp-bulk-tx", "xdp_bulk_tx", []string{"device"}, func(l map[string]string) string { return l["device"] })
	if !v.cur.Has("xdp_devmap_xmit_packets_total") && !v.cur.Has("xdp_bulk_tx_packets_total") {
		t.row("(devmap, cpumap and XDP_TX bulks need --collector.xdp.xmit)")
	}
	return t.String()
}

// bulkRows adds pps, drops and bulk average (packets per bulk) of one
// transmit family set.
func (v viewCtx) bulkRows(t *table, event, prefix string, labels []string, where func(map[string]string) string) {
	drops := byLabels(v.rates(prefix+"_drops_total"), labels...)
	bulks := byLabels(v.rates(prefix+"_bulks_total"), labels...)
	for _, s := range byLabels(v.rates(prefix+"_packets_total"), labels...) {
		avg := ""
		if b := lookup(bulks, s.Labels); b > 0 {
			avg = strconv.FormatFloat(s.Value/b, 'f', 2, 64)
		}
		t.row(event, where(s.Labels), pps(s.Value), pps(lookup(drops, s.Labels)), avg)
	}
}

func lookup(ss []Series, labels map[string]string) float64 {
	for _, s := range ss {
		match := true
		for n, val := range s.Labels {
			match = match && labels[n] == val
		}
		if match {
			return s.Value
		}
	}
	return 0
}

// napi is napi_monitor's view: the bulk histogram per device and context.
func (v viewCtx) napi() string {
	if !v.cur.Has("xdp_napi_poll_work") {
		return needs("napi", "xdp_napi_poll_work")
	}
	hs := HistogramRates(v.prev, v.cur, "xdp_napi_poll_work")
	sort.Slice(hs, func(i, j int) bool {
		a, b := hs[i].Labels, hs[j].Labels
		return a["device"]+a["context"] < b["device"]+b["context"]
	})
	exhausted := v.rates("xdp_napi_polls_budget_exhausted_total")
	var out strings.Builder
	for _, h := range hs {
		if !v.selects(Series{Labels: h.Labels}) || h.Count == 0 {
			continue
		}
		avg := h.SumRate / h.Count
		fmt.Fprintf(&out, "NAPI %s (%s): %s polls/s, %s pkts/s, average bulk %.1f, budget exhausted %.1f%%\n",
			h.Labels["device"], h.Labels["context"], pps(h.Count), pps(h.SumRate), avg,
			100*lookup(exhausted, h.Labels)/h.Count)
		peak := 0.0
		for _, p := range h.PerSec {
			peak = max(peak, p)
		}
		for i, p := range h.PerSec {
			if p == 0 {
				continue
			}
			bucket := "  >64"
			if !math.IsInf(h.Uppers[i], 1) {
				bucket = fmt.Sprintf("%5.0f", h.Uppers[i])
			}
			bar := strings.Repeat("#", int(math.Round(30*p/peak)))
			fmt.Fprintf(&out, "  bulk[%s] %10s polls/s %-30s\n", bucket, pps(p), bar)
		}
	}
	split := map[string]float64{}
	var total float64
	for _, h := range hs {
		split[h.Labels["context"]] += h.Count
		total += h.Count
	}
	if total > 0 {
		var parts []string
		for _, c := range []string{"idle", "ksoftirqd", "threaded", "other"} {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", c, 100*split[c]/total))
		}
		fmt.Fprintf(&out, "polls by context: %s\n", strings.Join(parts, ", "))
	}
	if out.Len() == 0 {
		return "no NAPI polls in this interval\n"
	}
	return out.String()
}

// curated are the ethtool families whose stats the exporter types and
// names (PCIe, DDIO, page cache and pool, CQE compression): highlighted.
func curated(family string) bool {
	return !strings.HasPrefix(family, "xdp_ethtool_stat_") && !strings.HasPrefix(family, "xdp_ethtool_queue_stat_")
}

// nic is ethtool_stats.pl's view: every driver stat that changed, per
// second, sorted by device then name.
func (v viewCtx) nic() string {
	if !v.cur.Has("xdp_ethtool_driver_info") {
		return needs("ethtool", "xdp_ethtool_driver_info")
	}
	// A row's text is built only if it is shown: a 128-queue host can
	// change thousands of stats per second and a screen shows 60.
	type row struct {
		dev, stat string
		m         *dto.Metric
		rate      float64
	}
	var rows []row
	for name, mf := range v.cur.Families {
		if !strings.HasPrefix(name, "xdp_ethtool_") || mf.GetType() == dto.MetricType_GAUGE {
			continue
		}
		stat := strings.TrimPrefix(name, "xdp_ethtool_")
		if curated(name) {
			stat = "* " + stat
		}
		each(v.prev, v.cur, name, func(m *dto.Metric, rate float64) {
			dev := label(m, "device")
			if rate != 0 && (v.filter == "" || strings.Contains(dev, v.filter)) {
				rows = append(rows, row{dev, stat, m, rate})
			}
		})
	}
	sort.Slice(rows, func(i, j int) bool {
		a, b := rows[i], rows[j]
		if a.dev != b.dev {
			return a.dev < b.dev
		}
		if a.stat != b.stat {
			return a.stat < b.stat
		}
		return lessLabels(a.m.GetLabel(), b.m.GetLabel())
	})
	t := newTable()
	for _, d := range v.headers() {
		t.row(d)
	}
	t.row("device", "stat (per second; * typed by the exporter)", "rate")
	for i, r := range rows {
		if v.rows > 0 && i >= v.rows {
			t.row(fmt.Sprintf("... %d more changed stats", len(rows)-i))
			break
		}
		t.row(r.dev, r.stat+otherLabels(r.m, "device"), pps(r.rate))
	}
	if len(rows) == 0 {
		t.row("(no driver stat changed in this interval)")
	}
	return t.String()
}

// lessLabels orders label pairs by value, numbers by value (queue 2
// before queue 10).
func lessLabels(a, b []*dto.LabelPair) bool {
	for i := range min(len(a), len(b)) {
		x, y := a[i].GetValue(), b[i].GetValue()
		if x != y {
			if digits(x) && digits(y) && len(x) != len(y) {
				return len(x) < len(y)
			}
			return x < y
		}
	}
	return len(a) < len(b)
}

func digits(s string) bool {
	for i := range len(s) {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// otherLabels renders m's labels but skip as {name=value,...}, "" when
// there are none.
func otherLabels(m *dto.Metric, skip string) string {
	var l strings.Builder
	sep := byte('{')
	for _, p := range m.GetLabel() {
		if p.GetName() != skip {
			l.WriteByte(sep)
			l.WriteString(p.GetName())
			l.WriteByte('=')
			l.WriteString(p.GetValue())
			sep = ','
		}
	}
	if sep == ',' {
		l.WriteByte('}')
	}
	return l.String()
}

// headers is one line per device: channels, rings and private flags.
func (v viewCtx) headers() []string {
	parts := map[string][]string{}
	add := func(family, format string, keyLabel string) {
		for _, s := range v.cur.Values(family) {
			if !v.selects(s) {
				continue
			}
			parts[s.Labels["device"]] = append(parts[s.Labels["device"]], fmt.Sprintf(format, s.Labels[keyLabel], s.Value))
		}
	}
	add("xdp_ethtool_channels", "%s channels %.0f", "type")
	add("xdp_ethtool_ring_descriptors", "%s ring %.0f", "ring")
	add("xdp_ethtool_private_flag", "%s=%.0f", "flag")
	devs := make([]string, 0, len(parts))
	for d := range parts {
		devs = append(devs, d)
	}
	sort.Strings(devs)
	out := make([]string, 0, len(devs))
	for _, d := range devs {
		sort.Strings(parts[d])
		out = append(out, d+": "+strings.Join(parts[d], ", "))
	}
	return out
}

// cpu is mpstat's columns per CPU, softnet drops and squeezes, and perf
// stat's IPC and cache-miss ratio where the perf collector runs.
func (v viewCtx) cpu() string {
	if !v.cur.Has("xdp_cpu_seconds_total") {
		return needs("cpu", "xdp_cpu_seconds_total")
	}
	modes := map[string]map[string]float64{}
	for _, s := range Rates(v.prev, v.cur, "xdp_cpu_seconds_total") {
		c := s.Labels["cpu"]
		if modes[c] == nil {
			modes[c] = map[string]float64{}
		}
		modes[c][s.Labels["mode"]] += s.Value
	}
	cpus := make([]string, 0, len(modes))
	for c := range modes {
		cpus = append(cpus, c)
	}
	sort.Slice(cpus, func(i, j int) bool { return lessKey(cpus[i], cpus[j]) })
	per := func(family string) map[string]float64 {
		out := map[string]float64{}
		for _, s := range Rates(v.prev, v.cur, family) {
			out[s.Labels["cpu"]] += s.Value
		}
		return out
	}
	drops, squeezed := per("xdp_softnet_dropped_total"), per("xdp_softnet_times_squeezed_total")
	instr, cycles := per("xdp_perf_instructions_total"), per("xdp_perf_cycles_total")
	misses, refs := per("xdp_perf_cache_misses_total"), per("xdp_perf_cache_references_total")
	perf := v.cur.Has("xdp_perf_cycles_total")
	t := newTable()
	head := []string{"CPU", "%usr", "%sys", "%irq", "%soft", "%idle", "drops/s", "squeezed/s"}
	if perf {
		head = append(head, "IPC", "cache-miss%")
	}
	t.row(head...)
	for _, c := range cpus {
		m := modes[c]
		var total float64
		for _, x := range m {
			total += x
		}
		if total == 0 {
			continue
		}
		pct := func(x float64) string { return strconv.FormatFloat(100*x/total, 'f', 1, 64) }
		row := []string{c, pct(m["user"] + m["nice"]), pct(m["system"]), pct(m["irq"]), pct(m["softirq"]), pct(m["idle"] + m["iowait"]),
			pps(drops[c]), pps(squeezed[c])}
		if perf {
			ipc, miss := "-", "-"
			if cycles[c] > 0 {
				ipc = strconv.FormatFloat(instr[c]/cycles[c], 'f', 2, 64)
			}
			if refs[c] > 0 {
				miss = strconv.FormatFloat(100*misses[c]/refs[c], 'f', 1, 64)
			}
			row = append(row, ipc, miss)
		}
		t.row(row...)
	}
	if !perf {
		t.row("(IPC and cache misses need --collector.perf)")
	}
	return t.String()
}

// overview is the headline of each view.
func (v viewCtx) overview() string {
	t := newTable()
	if v.cur.Has("xdp_rxq_packets_total") {
		t.row("rxq", "XDP-RX total "+pps(sum(v.rates("xdp_rxq_packets_total")))+" pps")
	} else if v.cur.Has("xdp_ethtool_rx_xdp_processed_packets_total") {
		t.row("rxq", "driver XDP packets "+pps(sum(v.rates("xdp_ethtool_rx_xdp_processed_packets_total")))+" pps (rxq collector off)")
	}
	if v.cur.Has("xdp_monitor_tracepoint_attached") {
		t.row("xdp", fmt.Sprintf("exceptions %s/s, redirect errors %s/s",
			pps(sum(v.rates("xdp_exceptions_total"))), pps(sum(v.rates("xdp_redirect_errors_total")))))
	}
	var polls, pkts float64
	for _, h := range HistogramRates(v.prev, v.cur, "xdp_napi_poll_work") {
		if v.selects(Series{Labels: h.Labels}) {
			polls += h.Count
			pkts += h.SumRate
		}
	}
	if polls > 0 {
		t.row("napi", fmt.Sprintf("%s polls/s, average bulk %.1f", pps(polls), pkts/polls))
	}
	if v.cur.Has("xdp_cpu_seconds_total") {
		var soft, idle, total float64
		for _, s := range Rates(v.prev, v.cur, "xdp_cpu_seconds_total") {
			total += s.Value
			switch s.Labels["mode"] {
			case "softirq":
				soft += s.Value
			case "idle", "iowait":
				idle += s.Value
			}
		}
		if total > 0 {
			t.row("cpu", fmt.Sprintf("%%soft %.1f, %%idle %.1f (all CPUs)", 100*soft/total, 100*idle/total))
		}
	}
	if v.cur.Has("xdp_skb_drops_untracked_total") {
		t.row("drop", "stack drops "+pps(sum(v.rates("xdp_skb_drops_total")))+"/s")
	}
	return t.String()
}
