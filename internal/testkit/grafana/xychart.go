package grafana

import (
	"fmt"
	"slices"
	"testing"
)

// Migrate returns the xychart options Grafana draws with after loading the
// panel: xyChartMigrationHandler in
// public/app/plugins/panel/xychart/migrations.ts runs whenever the panel has
// no pluginVersion and rebuilds the options from the pre-10.4 fields
// (seriesMapping, dims, series with field names). Our series are in the
// new shape, with matchers, and that rebuild would lose them: Migrate
// reports it as an error instead of modelling the rewrite.
func (p *Panel) Migrate() (PanelOptions, error) {
	if p.Type == "xychart" && p.PluginVersion == "" {
		return PanelOptions{}, fmt.Errorf("panel %q has no pluginVersion: Grafana's xychart migration rewrites it to manual mode with the old-format series it finds (none), so it draws nothing", p.Title)
	}
	return p.Options, nil
}

// Draw is what an xychart panel draws from its queries' frames: the
// panel's transformations, display names and matchers by Grafana's own
// code (Apply), the migration its JSON gets on load, and the series
// preparation. The error is for a panel Grafana cannot draw at all; errs
// has, by index in options.series, why a config found no series.
func (p *Panel) Draw(t testing.TB, frames []*Frame) (series []XYSeries, errs map[int]error, err error) {
	t.Helper()
	frames, err = p.Apply(t, frames)
	if err != nil {
		return nil, nil, err
	}
	opts, err := p.Migrate()
	if err != nil {
		return nil, nil, err
	}
	series, errs = PrepSeries(opts, frames)
	return series, errs, nil
}

// XYSeries is one series xychart draws: the x and y fields it found.
type XYSeries struct {
	Name   string
	Config int // index in options.series
	X, Y   *Field
}

// PrepSeries is prepSeries in public/app/plugins/panel/xychart/utils.ts
// (v2/utils.ts while the new xychart was beside the old one), which is
// Grafana's AGPL code: in manual mode each series config needs a frame, an
// x and a y matcher; the frame matcher is byIndex (no other frame matcher
// is implemented there); x is the first number or time field of that
// frame the x matcher selects (the earlier version took numbers only), y
// the first other number field the y matcher selects. Which fields a
// matcher selects, and their display names, are Grafana's own answer
// (Apply). It returns the series found and, by config index, why each
// config that found none did not.
func PrepSeries(opts PanelOptions, frames []*Frame) ([]XYSeries, map[int]error) {
	errs := map[int]error{}
	if opts.Mapping != "manual" {
		errs[-1] = fmt.Errorf("mapping %q: only manual mapping is checked", opts.Mapping)
		return nil, errs
	}
	var out []XYSeries
	for i, c := range opts.Series {
		s, err := prepOne(i, c, frames)
		if err != nil {
			errs[i] = fmt.Errorf("series %d: %w", i, err)
			continue
		}
		s.Config = i
		out = append(out, s)
	}
	return out, errs
}

func prepOne(i int, c SeriesConfig, frames []*Frame) (XYSeries, error) {
	if c.Frame == nil || c.X == nil || c.Y == nil {
		return XYSeries{}, fmt.Errorf("manual series without frame, x and y matchers is skipped")
	}
	if c.Frame.Matcher.ID != "byIndex" {
		return XYSeries{}, fmt.Errorf("frame matcher %q matches no frame in xychart", c.Frame.Matcher.ID)
	}
	idx, ok := c.Frame.Matcher.Options.(float64)
	if !ok || int(idx) < 0 || int(idx) >= len(frames) {
		return XYSeries{}, fmt.Errorf("frame index %v: the panel has %d frames after its transformations", c.Frame.Matcher.Options, len(frames))
	}
	fr := frames[int(idx)]
	xKey, yKey := seriesKey(i, "x"), seriesKey(i, "y")
	x := firstField(fr, func(f *Field) bool {
		return (f.Type == TypeNumber || f.Type == TypeTime) && slices.Contains(f.Matched, xKey)
	})
	if x == nil {
		return XYSeries{}, fmt.Errorf("no number field %v in frame %d (fields: %v)", c.X.Matcher.Options, int(idx), names(fr))
	}
	y := firstField(fr, func(f *Field) bool { return f != x && f.Type == TypeNumber && slices.Contains(f.Matched, yKey) })
	if y == nil {
		return XYSeries{}, fmt.Errorf("no number field %v in frame %d (fields: %v)", c.Y.Matcher.Options, int(idx), names(fr))
	}
	return XYSeries{Name: y.Display, X: x, Y: y}, nil
}

func firstField(fr *Frame, match func(*Field) bool) *Field {
	for _, f := range fr.Fields {
		if match(f) {
			return f
		}
	}
	return nil
}

// Points is the number of rows where both x and y have a value: what the
// scatter path draws (it skips rows whose values are not numbers).
func (s XYSeries) Points() int {
	n := 0
	for i := range s.X.Values {
		if s.X.Values[i] != nil && i < len(s.Y.Values) && s.Y.Values[i] != nil {
			n++
		}
	}
	return n
}

func names(fr *Frame) []string {
	var out []string
	for _, f := range fr.Fields {
		out = append(out, f.Display+" ("+string(f.Type)+")")
	}
	return out
}
