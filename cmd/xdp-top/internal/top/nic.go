package top

import (
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

// curated are the ethtool families whose stats the exporter types and
// names (PCIe, DDIO, page cache and pool, CQE compression, the NIC
// signals): highlighted.
func curated(family string) bool {
	return !strings.HasPrefix(family, "xdp_nic_stat_") && !strings.HasPrefix(family, "xdp_nic_queue_stat_")
}

// nicFamily says whether a counter family is one the view lists: the
// driver's stats and the NIC signals.
func nicFamily(name string) bool {
	return strings.HasPrefix(name, "xdp_nic_")
}

// nic is ethtool_stats.pl's view: a line per device with its signals
// (port load, drops for lack of host resources, allocation failures),
// then every driver stat that changed, per second, sorted by device then
// name.
func (v viewCtx) nic() string {
	if !v.cur.Has("xdp_nic_driver_info") {
		return needs("nic", "xdp_nic_driver_info")
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
		if !nicFamily(name) || mf.GetType() == dto.MetricType_GAUGE {
			continue
		}
		stat := strings.TrimPrefix(name, "xdp_nic_")
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
	for _, d := range slices.Concat(v.headers(), v.config(), v.signals(), v.uncore()) {
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
	add("xdp_nic_channels", "%s channels %.0f", "channel")
	add("xdp_nic_ring_descriptors", "%s ring %.0f", "ring")
	add("xdp_nic_private_flag", "%s=%.0f", "flag")
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

// signals is one line per device with NIC signals: the port's received
// packets per second, the drops for lack of host resources and their
// share of them, the allocation failures, each with its source.
func (v viewCtx) signals() []string {
	type dev struct {
		port, drops, alloc  float64
		portSrc, dropSrc    string
		hasPort, hasAlloc   bool
		dropStats, allocSrc string
	}
	devs := map[string]*dev{}
	get := func(s Series) *dev {
		d := devs[s.Get("device")]
		if d == nil {
			d = &dev{}
			devs[s.Get("device")] = d
		}
		return d
	}
	// The counters each signal series is read from, by device, family
	// and where (the port families' direction is rx here).
	type signal struct{ device, family, where string }
	sources := map[signal]Series{}
	for _, s := range v.cur.Values("xdp_nic_signal_source_info") {
		sources[signal{s.Get("device"), s.Get("family"), s.Get("where")}] = s
	}
	source := func(s Series, family string) Series {
		return sources[signal{s.Get("device"), family, s.Get("where")}]
	}
	for _, s := range v.rates("xdp_nic_port_packets_total") {
		if s.Get("direction") == "rx" {
			d := get(s)
			d.port, d.portSrc, d.hasPort = d.port+s.Value, source(s, "xdp_nic_port_packets_total").Get("source"), true
		}
	}
	for _, s := range byLabels(v.rates("xdp_nic_rx_host_drops_total"), "device", "where") {
		d := get(s)
		d.drops += s.Value
		src := source(s, "xdp_nic_rx_host_drops_total")
		d.dropSrc = src.Get("source")
		where := ""
		if w := s.Get("where"); w != "" {
			where = " " + w
		}
		d.dropStats += fmt.Sprintf("%s%s %s, ", src.Get("stat"), where, pps(s.Value))
	}
	for _, s := range v.rates("xdp_nic_rx_alloc_failures_total") {
		d := get(s)
		d.alloc, d.allocSrc, d.hasAlloc = d.alloc+s.Value, source(s, "xdp_nic_rx_alloc_failures_total").Get("source"), true
	}
	names := slices.Sorted(maps.Keys(devs))
	out := make([]string, 0, len(names))
	for _, name := range names {
		d := devs[name]
		var parts []string
		if d.hasPort {
			parts = append(parts, fmt.Sprintf("port rx %s pps (%s)", pps(d.port), d.portSrc))
		}
		if d.dropStats != "" {
			share := ""
			if d.hasPort && d.port > 0 {
				share = fmt.Sprintf(", %.1f%% of port rx", 100*d.drops/d.port)
			}
			parts = append(parts, fmt.Sprintf("host-resource drops %s pps (%s: %s%s)", pps(d.drops), d.dropSrc, strings.TrimSuffix(d.dropStats, ", "), share))
		}
		if d.hasAlloc {
			parts = append(parts, fmt.Sprintf("rx alloc failures %s/s (%s)", pps(d.alloc), d.allocSrc))
		}
		out = append(out, name+": "+strings.Join(parts, "; "))
	}
	return out
}
