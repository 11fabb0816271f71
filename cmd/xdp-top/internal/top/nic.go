package top

import (
	"fmt"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
)

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
	for _, d := range append(v.headers(), v.uncore()...) {
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
