package main

import (
	"os"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/collector"
)

func TestMetricsDoc(t *testing.T) {
	const path = "../../METRICS.md"
	want := Markdown()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("METRICS.md is out of date; make generate rewrites it")
	}
}

// TestSeriesTablesNameCatalogue holds the hand-kept series tables to the
// catalogue: every family seriesOverride names exists, and every label
// labelFactor prices is a label of some family, so a renamed family or
// label fails here instead of leaving a stale formula in METRICS.md.
func TestSeriesTablesNameCatalogue(t *testing.T) {
	families := map[string]bool{}
	labels := map[string]bool{}
	for _, f := range collector.Catalogue() {
		families[f.Name] = true
		for _, l := range f.Labels {
			labels[l] = true
		}
	}
	for name := range seriesOverride {
		if !families[name] {
			t.Errorf("seriesOverride names %s, which no collector declares", name)
		}
	}
	for label := range labelFactor {
		if !labels[label] {
			t.Errorf("labelFactor prices label %q, which no family has", label)
		}
	}
}
