package top

import (
	"bytes"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"text/tabwriter"
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
