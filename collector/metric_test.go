package collector

import (
	"flag"
	"os"
	"testing"

	dto "github.com/prometheus/client_model/go"
)

var update = flag.Bool("update", false, "rewrite METRICS.md from the catalogue")

func TestMetricsDoc(t *testing.T) {
	const path = "../METRICS.md"
	want := MetricsMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatalf("METRICS.md is out of date; run: go test ./collector -run TestMetricsDoc -update")
	}
}

// TestMustInvalidUTF8: an interface name is any bytes but '/', ':' and
// white space; such a label value must not panic the scrape, and two names
// that differ only in bytes that are not UTF-8 stay two label values.
func TestMustInvalidUTF8(t *testing.T) {
	for in, want := range map[string]string{
		"eth\xff0": `eth\xff0`, "eth\xfe0": `eth\xfe0`, "\xc3": `\xc3`, "é\xe9": `é\xe9`, "eth0": "eth0",
	} {
		m := scrapeSuccess.Must(1, in)
		var out dto.Metric
		if err := m.Write(&out); err != nil {
			t.Fatal(err)
		}
		if got := out.GetLabel()[0].GetValue(); got != want {
			t.Errorf("label of %q is %q, want %q", in, got, want)
		}
	}
}

// TestSeriesTablesNameCatalogue holds the hand-kept series tables to the
// catalogue: every family seriesOverride names exists, and every label
// labelFactor prices is a label of some family, so a renamed family or
// label fails here instead of leaving a stale formula in METRICS.md.
func TestSeriesTablesNameCatalogue(t *testing.T) {
	families := map[string]bool{}
	labels := map[string]bool{}
	for _, f := range Catalogue() {
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
