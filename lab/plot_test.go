package lab

import (
	"image/png"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// sweepFixture is a sweep of this lab's size: two cores, veth rates.
func sweepFixture() SweepResult {
	return SweepResult{
		Scaling: []ScalingRow{
			{Queues: 1, PPS: map[Scenario]float64{Drop: 410_000, Linux: 150_000, TX: 300_000, Redirect: 260_000}},
			{Queues: 2, PPS: map[Scenario]float64{Drop: 790_000, Linux: 290_000, TX: 560_000, Redirect: 500_000}},
		},
		Load: []LoadRow{
			{OfferedPPS: 50_000, Busy: map[Scenario]float64{Drop: 12, Linux: 30}},
			{OfferedPPS: 200_000, Busy: map[Scenario]float64{Drop: 45, Linux: 100}},
		},
		Method: trafficgen.Choice{Method: trafficgen.Broadcast, Reason: "the fastest method this kernel allows"},
	}
}

// TestFigures: the cores axes tick whole numbers only, every figure has
// the paper's curves beside this box's, labelled and dashed, and the PNGs
// decode at the size written.
func TestFigures(t *testing.T) {
	figs, err := sweepFixture().figures()
	if err != nil {
		t.Fatal(err)
	}
	if len(figs) != 3 {
		t.Fatalf("%d figures, want drop-test, drop-cpu, tx-test", len(figs))
	}
	for _, f := range figs {
		if len(f.tiles) != 2 {
			t.Fatalf("%s: %d tiles, want this box and the paper", f.name, len(f.tiles))
		}
		for i, tl := range f.tiles {
			p := tl.plot
			if p.Title.Text == "" || p.X.Label.Text == "" || p.Y.Label.Text == "" {
				t.Errorf("%s tile %d: title %q, axes %q/%q", f.name, i, p.Title.Text, p.X.Label.Text, p.Y.Label.Text)
			}
			if p.X.Label.Text == "Number of cores" {
				ticks := p.X.Tick.Marker.Ticks(p.X.Min, p.X.Max)
				if len(ticks) == 0 {
					t.Errorf("%s tile %d: no cores ticks", f.name, i)
				}
				for _, tk := range ticks {
					if _, err := strconv.Atoi(tk.Label); tk.Label != "" && err != nil {
						t.Errorf("%s tile %d: cores tick %q is not a whole number", f.name, i, tk.Label)
					}
				}
			}
			for _, l := range tl.labels {
				if paperTile := i == 1; paperTile != strings.HasPrefix(l, paperLabel) {
					t.Errorf("%s tile %d: legend %q", f.name, i, l)
				}
			}
		}
		if want := "broadcast generator"; !strings.HasSuffix(f.tiles[0].plot.Title.Text, want) {
			t.Errorf("%s: this box's tile titled %q, want it to name the %s", f.name, f.tiles[0].plot.Title.Text, want)
		}
		if !strings.HasSuffix(f.tiles[1].plot.Title.Text, paperLabel) {
			t.Errorf("%s: paper tile titled %q", f.name, f.tiles[1].plot.Title.Text)
		}
	}
	dir := t.TempDir()
	if out := os.Getenv("XDP_LAB_FIGURES"); out != "" {
		dir = out
	}
	files, err := sweepFixture().plot(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 6 {
		t.Errorf("files %v, want an SVG and a PNG per figure", files)
	}
	for _, name := range []string{"drop-test", "drop-cpu", "tx-test"} {
		f, err := os.Open(filepath.Join(dir, name+".png"))
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(f)
		f.Close()
		if err != nil {
			t.Fatalf("%s.png: %v", name, err)
		}
		if b := img.Bounds(); b.Dx() < 1000 || b.Dy() < 300 {
			t.Errorf("%s.png is %v", name, b)
		}
	}
}
