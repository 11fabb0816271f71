package lab

import (
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/xdp-exporter/xdp_exporter/lab/paper"
)

// The benchmark notes' matplotlib rcParams: grey panel, white grid, this colour cycle
// and the markers o, s, ^, x.
var (
	panelGrey = color.RGBA{0xE6, 0xE6, 0xE6, 0xff}
	palette   = []color.RGBA{
		{0x1b, 0x9e, 0x77, 0xff}, {0xd9, 0x5f, 0x02, 0xff}, {0x75, 0x70, 0xb3, 0xff},
		{0xe7, 0x29, 0x8a, 0xff}, {0x66, 0xa6, 0x1e, 0xff}, {0xe6, 0xab, 0x02, 0xff},
	}
	glyphs = []draw.GlyphDrawer{draw.CircleGlyph{}, draw.BoxGlyph{}, draw.TriangleGlyph{}, draw.CrossGlyph{}}
)

// paperLabel marks the paper's curves in every legend.
const paperLabel = "paper, mlx5 100G"

// panel fills the data area grey, under the grid and the lines.
type panel struct{}

func (panel) Plot(c draw.Canvas, _ *plot.Plot) {
	r := c.Rectangle
	c.FillPolygon(panelGrey, []vg.Point{r.Min, {X: r.Max.X, Y: r.Min.Y}, r.Max, {X: r.Min.X, Y: r.Max.Y}})
}

// integerTicks labels every whole number: cores and queues are counts.
type integerTicks struct{}

func (integerTicks) Ticks(min, max float64) []plot.Tick {
	var ticks []plot.Tick
	for v := math.Ceil(min); v <= max; v++ {
		ticks = append(ticks, plot.Tick{Value: v, Label: strconv.Itoa(int(v))})
	}
	return ticks
}

type series struct {
	label string
	xy    plotter.XYs
	// dashed draws the paper's curves, as the dashboards do.
	dashed bool
}

// tile is one plot of a figure and the legend labels it carries.
type tile struct {
	plot   *plot.Plot
	labels []string
}

// legendLow puts the legend bottom right, where the CPU usage curves
// (which rise to 100%) leave room; otherwise it goes top left, above the
// rising Mpps curves, with headroom added for it.
func newTile(title, xlabel, ylabel string, integerX, legendLow bool, ymax float64, ss []series) (tile, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text, p.Y.Label.Text = xlabel, ylabel
	p.Y.Min, p.X.Min = 0, 0
	p.Y.Max = ymax
	if legendLow {
		p.Legend.Top, p.Legend.Left = false, false
		p.Legend.YOffs = vg.Points(8)
	} else {
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs = vg.Points(8)
		p.Y.Max = ymax * (1 + 0.12*float64(len(ss)))
	}
	p.Add(panel{})
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = color.White, color.White
	grid.Vertical.Width, grid.Horizontal.Width = vg.Points(1), vg.Points(1)
	p.Add(grid)
	t := tile{plot: p}
	xmax := 0.0
	for i, s := range ss {
		line, points, err := plotter.NewLinePoints(s.xy)
		if err != nil {
			return t, fmt.Errorf("%s: %s: %w", title, s.label, err)
		}
		line.Color = palette[i%len(palette)]
		if s.dashed {
			line.Dashes = []vg.Length{vg.Points(6), vg.Points(4)}
		}
		points.Color = palette[i%len(palette)]
		points.Shape = glyphs[i%len(glyphs)]
		points.Radius = vg.Points(3.5)
		p.Add(line, points)
		p.Legend.Add(s.label, line, points)
		t.labels = append(t.labels, s.label)
		for _, xy := range s.xy {
			xmax = max(xmax, xy.X)
		}
	}
	if integerX {
		p.X.Tick.Marker = integerTicks{}
		p.X.Max = xmax + 0.5
	}
	return t, nil
}

// figure is one PNG/SVG: this box's measurement and, beside it, the
// paper's on the same kind of axes (the two differ by two orders of
// magnitude, so one axis would flatten this box's curve).
type figure struct {
	name  string
	tiles []tile
}

func (f figure) save(dir string) ([]string, error) {
	const w, h = 14 * vg.Inch, 5 * vg.Inch
	var files []string
	for _, format := range []string{"svg", "png"} {
		c, err := draw.NewFormattedCanvas(w, h, format)
		if err != nil {
			return files, err
		}
		row := make([]*plot.Plot, len(f.tiles))
		for i, t := range f.tiles {
			row[i] = t.plot
		}
		tiles := draw.Tiles{Rows: 1, Cols: len(row), PadX: vg.Inch / 3, PadTop: vg.Inch / 8, PadBottom: vg.Inch / 8, PadLeft: vg.Inch / 8, PadRight: vg.Inch / 4}
		canvases := plot.Align([][]*plot.Plot{row}, tiles, draw.New(c))
		for i, p := range row {
			p.Draw(canvases[0][i])
		}
		path := filepath.Join(dir, f.name+"."+format)
		out, err := os.Create(path)
		if err != nil {
			return files, err
		}
		_, err = c.WriteTo(out)
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return files, err
		}
		files = append(files, path)
	}
	return files, nil
}

// paperXY is column col of a paper table against its first column, scaled
// (pps -> Mpps), without the cells the paper has no value for.
func paperXY(rows [][]float64, col int, scale float64) plotter.XYs {
	var xy plotter.XYs
	for _, r := range rows {
		if !math.IsNaN(r[col]) {
			xy = append(xy, plotter.XY{X: r[0], Y: r[col] / scale})
		}
	}
	return xy
}

// figures are the paper's drop-test (Mpps vs cores), drop-cpu (CPU usage
// vs offered load) and tx-test (TX vs REDIRECT Mpps vs cores), each with
// the paper's curves beside this box's.
func (r SweepResult) figures() ([]figure, error) {
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
	usage := paper.CPUUsage()
	specs := []struct {
		name, title, x, y string
		integerX, low     bool
		ymax, paperYmax   float64
		box, paper        []series
	}{
		{"drop-test", "Packet drop performance", "Number of cores", "Mpps", true, false, maxMpps, 130,
			[]series{{label: "XDP", xy: cores(Drop)}, {label: "Linux (raw)", xy: cores(Linux)}},
			[]series{
				{label: paperLabel + ": DPDK", xy: paperXY(paper.Drop, 1, 1e6), dashed: true},
				{label: paperLabel + ": XDP", xy: paperXY(paper.Drop, 2, 1e6), dashed: true},
				{label: paperLabel + ": Linux (raw)", xy: paperXY(paper.Drop, 3, 1e6), dashed: true},
				{label: paperLabel + ": Linux (conntrack)", xy: paperXY(paper.Drop, 4, 1e6), dashed: true},
			}},
		{"drop-cpu", "CPU usage vs offered load", "Offered load (Mpps)", "CPU usage (%)", false, true, 110, 110,
			[]series{{label: "XDP", xy: load(Drop)}, {label: "Linux", xy: load(Linux)}},
			[]series{
				{label: paperLabel + ": DPDK", xy: paperXY(usage, 1, 1), dashed: true},
				{label: paperLabel + ": XDP", xy: paperXY(usage, 2, 1), dashed: true},
				{label: paperLabel + ": Linux", xy: paperXY(usage, 3, 1), dashed: true},
			}},
		{"tx-test", "XDP_TX vs XDP_REDIRECT", "Number of cores", "Mpps", true, false, maxMpps, 80,
			[]series{{label: "TX", xy: cores(TX)}, {label: "REDIRECT", xy: cores(Redirect)}},
			[]series{
				{label: paperLabel + ": TX", xy: paperXY(paper.TXvsRedirect(), 1, 1e6), dashed: true},
				{label: paperLabel + ": REDIRECT", xy: paperXY(paper.TXvsRedirect(), 2, 1e6), dashed: true},
			}},
	}
	var figs []figure
	for _, s := range specs {
		box, err := newTile(s.title+": this box, "+string(r.Method.Method)+" generator", s.x, s.y, s.integerX, s.low, s.ymax, s.box)
		if err != nil {
			return nil, err
		}
		ref, err := newTile(s.title+": "+paperLabel, s.x, s.y, s.integerX, s.low, s.paperYmax, s.paper)
		if err != nil {
			return nil, err
		}
		if !s.integerX {
			// The paper's xlim(0, 27).
			ref.plot.X.Max = 27
		}
		figs = append(figs, figure{name: s.name, tiles: []tile{box, ref}})
	}
	return figs, nil
}

// plot writes the figures as SVG and PNG.
func (r SweepResult) plot(dir string) ([]string, error) {
	figs, err := r.figures()
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range figs {
		out, err := f.save(dir)
		files = append(files, out...)
		if err != nil {
			return files, err
		}
	}
	return files, nil
}
