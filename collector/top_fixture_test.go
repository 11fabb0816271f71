package collector

import (
	"bytes"
	"flag"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/prometheus/common/expfmt"
)

var topFixture = flag.Bool("top.fixture", false, "rewrite "+topFixturePath+" from the collectors")

// topFixturePath is the scrape cmd/xdp-top/internal/top's render benchmark reads.
var topFixturePath = filepath.Join("..", "cmd", "xdp-top", "internal", "top", "testdata", "mlx5-128cpu.prom")

// TestTopFixture renders, through the exporter's own ethtool and cpu
// collectors, the scrape of a 128-CPU host with two 64-queue mlx5 ports
// from this package's fixtures (bigFixture's mlx5 string set, the
// testdata/proc/128cpu files), with the default flags: the file
// xdp-top's render benchmark reads. It fails when the collectors' output drifts from the file; rerun
// with -top.fixture.
func TestTopFixture(t *testing.T) {
	devs := map[string]*fixtureDev{}
	for _, d := range []string{"mlx5p0", "mlx5p1"} {
		devs[d] = bigFixture("mlx5_core", 64, 37, 132)
	}
	fams, err := newFamilyFilter("ethtool", nil, regexp.MustCompile(DefaultEthtoolMetricsExclude))
	if err != nil {
		t.Fatal(err)
	}
	ethtool := newEthtoolCollector(EthtoolConfig{
		Filter:    Filter{Families: fams},
		SumQueues: regexp.MustCompile(DefaultEthtoolSumQueues),
	}, newFixtureSource(devs), slog.New(slog.DiscardHandler))
	mfs, err := pedantic(t, ethtool, newCPUForTest(t, CPUConfig{ProcFS: "testdata/proc/128cpu"}))
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
	if *topFixture {
		if err := os.WriteFile(topFixturePath, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(topFixturePath)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, b.Bytes()) {
		t.Fatalf("%s differs from what the collectors produce; rerun with -top.fixture", topFixturePath)
	}
}
