package kernelmatrix

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/support"
)

// recording is what the matrix measured, by kernel series.
var recording = filepath.Join("testdata", "support.json")

// checkRecording holds what the guests' default exporters reported to
// the recording, or with XDP_EXPORTER_RECORD=1 (make generate RECORD=1)
// writes it. It compares the support table, not the kernels' release
// strings, which every Debian point release changes.
func checkRecording(t *testing.T, results map[string]support.Support) {
	t.Helper()
	if testenv.Recording() {
		if err := support.Save(recording, results); err != nil {
			t.Fatal(err)
		}
	}
	recorded, err := support.Load(recording)
	if err != nil {
		t.Fatal(err)
	}
	if want := support.Table(results); support.Table(recorded) != want {
		t.Errorf("the kernels' support differs from %s; make generate RECORD=1 records it (and docs/kernels.md). Measured:\n%s", recording, want)
	}
}

// TestKernelsDocGenerated holds the support table of docs/kernels.md to
// the recording (make generate writes it).
func TestKernelsDocGenerated(t *testing.T) {
	results, err := support.Load(recording)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("..", "docs", "kernels.md")
	doc, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	want, err := support.Rewrite(string(doc), results)
	if err != nil {
		t.Fatal(err)
	}
	if string(doc) != want {
		t.Errorf("%s's support table differs from %s; make generate rewrites it", path, recording)
	}
}
