package exportertest

import (
	"fmt"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Families is one scrape by family name: the one parsed form of the
// exposition that every test reads samples from.
type Families map[string]*dto.MetricFamily

// Parse parses the text exposition format (Decode) and fails t on
// anything else.
func Parse(t testing.TB, text string) Families {
	t.Helper()
	mfs, err := Decode(text)
	if err != nil {
		t.Fatal(err)
	}
	return mfs
}

// Decode parses the text exposition format, holding metric and label
// names to Prometheus' classic rules.
func Decode(text string) (Families, error) {
	parser := expfmt.NewTextParser(model.LegacyValidation)
	mfs, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		return nil, fmt.Errorf("parsing the exposition: %w", err)
	}
	return mfs, nil
}

// ByName indexes gathered families by name.
func ByName(mfs []*dto.MetricFamily) Families {
	out := make(Families, len(mfs))
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

// Series is the samples of family whose labels include every given
// name/value pair.
func (f Families) Series(family string, labels ...string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range f[family].GetMetric() {
		if Matches(m, labels...) {
			out = append(out, m)
		}
	}
	return out
}

// Sum adds up the matching samples' values (Value), and counts them.
func (f Families) Sum(family string, labels ...string) (sum float64, n int) {
	for _, m := range f.Series(family, labels...) {
		sum += Value(m)
		n++
	}
	return sum, n
}

// Value is the one matching sample's value; it fails t unless exactly
// one sample matches.
func (f Families) Value(t testing.TB, family string, labels ...string) float64 {
	t.Helper()
	if _, ok := f[family]; !ok {
		t.Fatalf("family %s missing", family)
	}
	ms := f.Series(family, labels...)
	if len(ms) != 1 {
		t.Fatalf("%s{%s}: %d samples match, want 1", family, strings.Join(labels, ","), len(ms))
	}
	return Value(ms[0])
}

// Values maps the value of label to the value of each matching sample.
func (f Families) Values(family, label string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range f.Series(family, labels...) {
		out[Label(m, label)] = Value(m)
	}
	return out
}

// Value is a counter's, gauge's or untyped sample's value, or a
// histogram's sum.
func Value(m *dto.Metric) float64 {
	return m.GetCounter().GetValue() + m.GetGauge().GetValue() + m.GetUntyped().GetValue() + m.GetHistogram().GetSampleSum()
}

// Label is m's value of label name, "" where it has none.
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Matches reports whether m has every name/value pair of labels (a label
// it lacks has the value "", as in PromQL): the one label matcher of the
// tests.
func Matches(m *dto.Metric, labels ...string) bool {
	for i := 0; i+1 < len(labels); i += 2 {
		if Label(m, labels[i]) != labels[i+1] {
			return false
		}
	}
	return true
}

// Count is the number of series the families are in the exposition: a
// histogram's buckets, +Inf, _sum and _count each one.
func (f Families) Count() int {
	n := 0
	for _, mf := range f {
		n += FamilySeries(mf)
	}
	return n
}

// FamilySeries is the number of series one family is in the exposition.
func FamilySeries(mf *dto.MetricFamily) int {
	n := 0
	for _, m := range mf.GetMetric() {
		if h := m.GetHistogram(); h != nil {
			n += len(h.GetBucket()) + 3 // the buckets, +Inf, _sum, _count
			continue
		}
		n++
	}
	return n
}

// CheckScrape parses one scrape and returns an error for a duplicate
// series or a collector that reported success 0 (what the host does not
// support reports success 1).
func CheckScrape(body string) error {
	mfs, err := Decode(body)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(body, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		series := line[:strings.LastIndexByte(line, ' ')]
		if seen[series] {
			return fmt.Errorf("duplicate series %s", series)
		}
		seen[series] = true
	}
	for _, m := range mfs.Series("xdp_scrape_collector_success") {
		if Value(m) != 1 {
			return fmt.Errorf("collector %s failed", Label(m, "collector"))
		}
	}
	return nil
}
