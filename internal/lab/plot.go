package lab

import (
	"image/color"
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// The seed's matplotlib rcParams: grey panel, white grid, this colour cycle
// and the markers o, s, ^, x.
var (
	panelGrey = color.RGBA{0xE6, 0xE6, 0xE6, 0xff}
	palette   = []color.RGBA{
		{0x1b, 0x9e, 0x77, 0xff}, {0xd9, 0x5f, 0x02, 0xff}, {0x75, 0x70, 0xb3, 0xff},
		{0xe7, 0x29, 0x8a, 0xff}, {0x66, 0xa6, 0x1e, 0xff}, {0xe6, 0xab, 0x02, 0xff},
	}
	glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}
)

// panel fills the data area grey, under the grid and the lines.
type panel struct{}

func (panel) Plot(c draw.Canvas, _ *plot.Plot) {
	r := c.Rectangle
	c.FillPolygon(panelGrey, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

type series struct {
	label string
	xy    plotter.XYs
}

func figure(xlabel, ylabel string, ymax float64, ss []series) (*plot.Plot, error) {
	p := plot.New()
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.Y.Min, p.Y.Max = 0, ymax
	p.Legend.Top = true
	p.Add(panel{})
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = color.White, color.White
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(1), vg.Points(1)
	p.Add(grid)
	for i, s := range ss {
		line, points, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return nil, err
		}
		line.Color = palette[i%len(palette)]
		points.Color = palette[i%len(palette)]
		points.Shape = glyphs[i%len(glyphs)]
		points.Radius = vg.Points(3.5)
		p.Add(line, points)
		p.Legend.Add(s.label, line, points)
	}
	return p, nil
}

func save(p *plot.Plot, dir, name string) ([]string, error) {
	var files []string
	for _, ext := range []string{".svg", ".png"} {
		path := filepath.Join(dir, name+ext)
		if err := p.Save(8*vg.Inch, 5*vg.Inch, path); err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// plot draws the paper's figures: drop-test (Mpps vs cores), drop-cpu (CPU
// usage vs offered load) and tx-test (TX vs REDIRECT Mpps vs cores).
func (r SweepResult) plot(dir string) ([]string, error) {
	cores := func(sc Scenario) plotter.XYs {
		var xy plotter.XYs
		for _, row := range r.Scaling {
			xy = append(xy, plotter.XY{X: float64(row.Queues), Y: row.PPS[sc] / 1e6})
		}
		return xy
	}
	maxMpps := 0.0
	for _, row := range r.Scaling {
		for _, v := range row.PPS {
			maxMpps = max(maxMpps, v/1e6)
		}
	}
	load := func(sc Scenario) plotter.XYs {
		var xy plotter.XYs
		for _, row := range r.Load {
			xy = append(xy, plotter.XY{X: row.OfferedPPS / 1e6, Y: row.Busy[sc]})
		}
		return xy
	}
	figs := []struct {
		name, x, y string
		ymax       float64
		ss         []series
	}{
		{"drop-test", "Number of cores", "Mpps", maxMpps * 1.2,
			[]series{{"XDP", cores(Drop)}, {"Linux (raw)", cores(Linux)}}},
		{"drop-cpu", "Offered load (Mpps)", "CPU usage (%)", 110,
			[]series{{"XDP", load(Drop)}, {"Linux", load(Linux)}}},
		{"tx-test", "Number of cores", "Mpps", maxMpps * 1.2,
			[]series{{"TX", cores(TX)}, {"REDIRECT", cores(Redirect)}}},
	}
	var files []string
	for _, f := range figs {
		p, err := figure(f.x, f.y, f.ymax, f.ss)
		if err != nil {
			return files, err
		}
		out, err := save(p, dir, f.name)
		files = append(files, out...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
