package top

import (
	"bytes"
	"encoding/csv"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Summary accumulates per-second rates over a run, interval by interval,
// so that a counter reset in the middle (an exporter restart) costs that
// one interval's increase counted from zero, not the whole window's.
type Summary struct {
	seconds float64
	// per table, per row key: the sum of rate x interval of each column.
	tables map[string]*summaryTable
}

type summaryTable struct {
	columns []string
	rows    map[string][]float64
	keys    map[string][]string // row key -> its identifying cells
}

// NewSummary returns an empty summary.
func NewSummary() *Summary { return &Summary{tables: map[string]*summaryTable{}} }

// The summary's tables and their columns.
const (
	summaryRxq = "rxq"
	summaryCPU = "cpu"
	summaryNIC = "nic"
)

var cpuModes = []string{"user", "nice", "system", "irq", "softirq", "idle", "iowait", "steal"}

// Add accumulates the interval between two scrapes.
func (s *Summary) Add(prev, cur *Scrape) {
	if prev == nil || cur == nil {
		return
	}
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		return
	}
	s.seconds += dt
	for _, r := range Rates(prev, cur, "xdp_rxq_packets_total") {
		s.add(summaryRxq, []string{"device", "queue", "cpu"}, []string{"pps"},
			[]string{r.Get("device"), r.Get("queue"), r.Get("cpu")}, 0, r.Value*dt)
	}
	for _, r := range Rates(prev, cur, "xdp_cpu_seconds_total") {
		for i, m := range cpuModes {
			if r.Get("mode") == m {
				s.add(summaryCPU, []string{"cpu"}, cpuModes, []string{r.Get("cpu")}, i, r.Value*dt)
			}
		}
	}
	for name, mf := range cur.Families {
		if !strings.HasPrefix(name, "xdp_nic_") || mf.GetType().String() == "GAUGE" {
			continue
		}
		for _, r := range Rates(prev, cur, name) {
			stat := strings.TrimPrefix(name, "xdp_nic_")
			if q := r.Get("queue"); q != "" {
				stat += "{queue=" + q + "}"
			}
			s.add(summaryNIC, []string{"device", "stat"}, []string{"per_second"}, []string{r.Get("device"), stat}, 0, r.Value*dt)
		}
	}
}

func (s *Summary) add(table string, keyCols, valueCols, key []string, col int, v float64) {
	t := s.tables[table]
	if t == nil {
		t = &summaryTable{columns: append(append([]string{}, keyCols...), valueCols...),
			rows: map[string][]float64{}, keys: map[string][]string{}}
		s.tables[table] = t
	}
	k := strings.Join(key, "\x00")
	if t.rows[k] == nil {
		t.rows[k] = make([]float64, len(valueCols))
		t.keys[k] = key
	}
	t.rows[k][col] += v
}

// rows returns a table's rows as cells, the means over the run: pps for
// counters, percent of each CPU's time for cpu; rows that never moved are
// left out of nic.
func (s *Summary) rows(table string) (columns []string, out [][]string) {
	t := s.tables[table]
	if t == nil || s.seconds == 0 {
		return nil, nil
	}
	keys := make([]string, 0, len(t.rows))
	for k := range t.rows {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return lessKey(keys[i], keys[j]) })
	columns = t.columns
	if table == summaryCPU {
		columns = append([]string{"cpu"}, prefixed("%", cpuModes)...)
	}
	for _, k := range keys {
		vals := t.rows[k]
		cells := append([]string{}, t.keys[k]...)
		switch table {
		case summaryCPU:
			var total float64
			for _, v := range vals {
				total += v
			}
			for _, v := range vals {
				cells = append(cells, strconv.FormatFloat(100*v/max(total, 1e-12), 'f', 1, 64))
			}
		default:
			if vals[0] == 0 {
				continue
			}
			cells = append(cells, strconv.FormatFloat(vals[0]/s.seconds, 'f', 0, 64))
		}
		out = append(out, cells)
	}
	return columns, out
}

func prefixed(p string, xs []string) []string {
	out := make([]string, len(xs))
	for i, x := range xs {
		out[i] = p + x
	}
	return out
}

// Markdown renders the summary as one Markdown table per source.
func (s *Summary) Markdown(endpoint string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## %s: means over %.0f s\n", endpoint, s.seconds)
	for _, table := range []string{summaryRxq, summaryCPU, summaryNIC} {
		cols, rows := s.rows(table)
		if len(rows) == 0 {
			continue
		}
		fmt.Fprintf(&b, "\n### %s\n\n| %s |\n|%s\n", table, strings.Join(cols, " | "), strings.Repeat("---|", len(cols)))
		for _, r := range rows {
			fmt.Fprintf(&b, "| %s |\n", strings.Join(r, " | "))
		}
	}
	return b.String()
}

// CSV renders the summary as rows of endpoint, table, then the table's
// cells, each table preceded by its header row.
func (s *Summary) CSV(endpoint string) string {
	var buf bytes.Buffer
	w := csv.NewWriter(&buf)
	for _, table := range []string{summaryRxq, summaryCPU, summaryNIC} {
		cols, rows := s.rows(table)
		if len(rows) == 0 {
			continue
		}
		_ = w.Write(append([]string{"endpoint", "table"}, cols...))
		for _, r := range rows {
			_ = w.Write(append([]string{endpoint, table}, r...))
		}
	}
	w.Flush()
	return buf.String()
}
