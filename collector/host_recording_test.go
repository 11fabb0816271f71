package collector

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/cilium/ebpf"
	"github.com/prometheus/common/expfmt"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// hostRecording is the whole-host fixture's scrape that xdp-top's render
// tests and benchmark read.
var hostRecording = filepath.Join("..", "cmd", "xdp-top", "internal", "top", "testdata", "host.prom")

// TestHostRecording renders one scrape of the whole-host fixture's
// collectors that read no running kernel (hostFiles: cpu, ethtool,
// netdev, pcie, xsk) with the default flags, and holds hostRecording to
// it; XDP_EXPORTER_RECORD=1 (make generate RECORD=1) rewrites it. The BPF
// collectors' series carry the ids of the programs a run loads, so
// xdp-top's tests add theirs in the shape the exporter exports them.
func TestHostRecording(t *testing.T) {
	files := hostFiles(t, commandLineHostFlags(t))
	names := make([]string, 0, len(files))
	for name := range files {
		names = append(names, name)
	}
	slices.Sort(names)
	var cs []Collector
	for _, name := range names {
		cs = append(cs, onLinks{files[name], hostLinks(make([]ebpf.ProgramID, len(hostNICs)))})
	}
	mfs, err := pedantic(t, cs...)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	enc := expfmt.NewEncoder(&b, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, mf := range mfs {
		if err := enc.Encode(mf); err != nil {
			t.Fatal(err)
		}
	}
	if testenv.Recording() {
		if err := os.WriteFile(hostRecording, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(hostRecording)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s differs from the collectors' scrape of the whole-host fixture; make generate RECORD=1 rewrites it", hostRecording)
	}
}
