package collector

import (
	"flag"
	"os"
	"testing"
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
