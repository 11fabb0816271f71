package collector

import (
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

// TestLabelGlossary holds the families to one meaning per label name:
// every label of every family has its entry in the glossary, which
// METRICS.md prints, and every entry is a label of some family.
func TestLabelGlossary(t *testing.T) {
	used := map[string]bool{}
	for _, f := range Catalogue() {
		for _, l := range f.Labels {
			used[l] = true
			if LabelMeaning(l) == nil {
				t.Errorf("%s: label %s is not in the glossary (collector/labels.go)", f.Name, l)
			}
		}
	}
	for _, l := range Glossary() {
		if !used[l.Name] {
			t.Errorf("the glossary explains %s, which no family has", l.Name)
		}
		if !strings.HasSuffix(l.Meaning, ".") {
			t.Errorf("%s: the meaning is not a sentence: %q", l.Name, l.Meaning)
		}
	}
}

// TestLabelValues reads every series of the whole-host fixture with the
// default flags and with every family per queue, and of every captured
// driver dump with every family kept: no label value is empty (a label
// the kernel gives no value is left out), and each is one the glossary
// says the label has.
func TestLabelValues(t *testing.T) {
	check := func(what string, mfs []*dto.MetricFamily) {
		t.Helper()
		bad := map[string]int{}
		n := 0
		for _, mf := range mfs {
			for _, m := range mf.GetMetric() {
				n++
				for _, lp := range m.GetLabel() {
					name, v := lp.GetName(), lp.GetValue()
					l := LabelMeaning(name)
					switch {
					case v == "":
						t.Errorf("%s: %s has %s=\"\"", what, mf.GetName(), name)
					case l == nil:
						t.Errorf("%s: %s has %s, which the glossary does not explain", what, mf.GetName(), name)
					case !l.Matches(v):
						if bad[mf.GetName()+name]++; bad[mf.GetName()+name] == 1 {
							t.Errorf("%s: %s{%s=%q}: not a value of %s (%s)", what, mf.GetName(), name, v, name, l.Values)
						}
					}
				}
			}
		}
		t.Logf("%s: %d series", what, n)
	}
	check("host, default flags", hostScrape(t, commandLineHostFlags(t)))
	check("host, every family per queue", hostScrape(t, hostFlags{}))

	var mfs []*dto.MetricFamily
	for _, mf := range gather(t, fixtureCollector(t, allFixtures(t), "", "", nil)) {
		mfs = append(mfs, mf)
	}
	check("ethtool fixtures, every family", mfs)
}
