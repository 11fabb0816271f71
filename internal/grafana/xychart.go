package grafana

import (
	"fmt"
)

// Migrate returns the xychart options Grafana draws with after loading the
// panel: xyChartMigrationHandler in
// public/app/plugins/panel/xychart/migrations.ts runs whenever the panel has
// no pluginVersion and rebuilds the options from the pre-10.4 fields
// (seriesMapping, dims, series with field names). A panel without
// pluginVersion and without seriesMapping comes out in manual mode with
// the series it had under the old shape, so our series (already in the
// new shape, with matchers) would be lost: Migrate reports that as an
// error instead of modelling the rewrite.
func (p *Panel) Migrate() (PanelOptions, error) {
	if p.Type != "xychart" || p.PluginVersion != "" {
		return p.Options, nil
	}
	if p.Options.SeriesMapping == "auto" {
		return PanelOptions{Mapping: "auto"}, nil
	}
	return PanelOptions{Mapping: "manual"}, fmt.Errorf("panel %q has no pluginVersion: Grafana's xychart migration rewrites it to manual mode with the old-format series it finds (none), so it draws nothing", p.Title)
}

// Draw is what an xychart panel draws from its queries' frames: the
// panel's transformations, the migration its JSON gets on load, and the
// series preparation. The error is for a panel Grafana cannot draw at
// all; errs has one entry per series config that found no series.
func (p *Panel) Draw(frames []*Frame) (series []XYSeries, errs []error, err error) {
	frames, err = Transform(p.Transformations, frames)
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
	Frame  *Frame
	X, Y   *Field
}

// PrepSeries is prepSeries in public/app/plugins/panel/xychart/utils.ts
// (v2/utils.ts while the new xychart was beside the old one): in manual
// mode each series config needs a frame, an x and a y matcher; the frame
// matcher is byIndex (no other frame matcher is implemented there); x is
// the first number or time field of that frame the x matcher selects (the
// earlier version took numbers only), y the first other number field the
// y matcher selects. It returns the series found and,
// for each config that found none, an error saying why.
func PrepSeries(opts PanelOptions, frames []*Frame) ([]XYSeries, []error) {
	var out []XYSeries
	var errs []error
	cfgs := opts.Series
	if opts.Mapping != "manual" {
		return nil, []error{fmt.Errorf("mapping %q: only manual mapping is checked", opts.Mapping)}
	}
	for i, c := range cfgs {
		if c.Frame == nil || c.X == nil || c.Y == nil {
			errs = append(errs, fmt.Errorf("series %d: manual series without frame, x and y matchers is skipped", i))
			continue
		}
		if c.Frame.Matcher.ID != "byIndex" {
			errs = append(errs, fmt.Errorf("series %d: frame matcher %q matches no frame in xychart", i, c.Frame.Matcher.ID))
			continue
		}
		idx, ok := c.Frame.Matcher.Options.(float64)
		if !ok || int(idx) < 0 || int(idx) >= len(frames) {
			errs = append(errs, fmt.Errorf("series %d: frame index %v: the panel has %d frames after its transformations", i, c.Frame.Matcher.Options, len(frames)))
			continue
		}
		fr := frames[int(idx)]
		xm, err := fieldMatcher(c.X.Matcher, fr, frames)
		if err != nil {
			errs = append(errs, fmt.Errorf("series %d x: %w", i, err))
			continue
		}
		ym, err := fieldMatcher(c.Y.Matcher, fr, frames)
		if err != nil {
			errs = append(errs, fmt.Errorf("series %d y: %w", i, err))
			continue
		}
		var x, y *Field
		for _, f := range fr.Fields {
			if (f.Type == TypeNumber || f.Type == TypeTime) && xm(f) {
				x = f
				break
			}
		}
		if x == nil {
			errs = append(errs, fmt.Errorf("series %d: no number field %v in frame %d (fields: %v)", i, c.X.Matcher.Options, int(idx), names(fr, frames)))
			continue
		}
		for _, f := range fr.Fields {
			if f != x && f.Type == TypeNumber && ym(f) {
				y = f
				break
			}
		}
		if y == nil {
			errs = append(errs, fmt.Errorf("series %d: no number field %v in frame %d (fields: %v)", i, c.Y.Matcher.Options, int(idx), names(fr, frames)))
			continue
		}
		out = append(out, XYSeries{Name: DisplayName(y, fr, frames), Config: i, Frame: fr, X: x, Y: y})
	}
	return out, errs
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

// fieldMatcher supports byName (display name equality, as
// packages/grafana-data/src/transformations/matchers/nameMatcher.ts) and
// byType.
func fieldMatcher(m Matcher, frame *Frame, all []*Frame) (func(*Field) bool, error) {
	switch m.ID {
	case "byName":
		name, _ := m.Options.(string)
		return func(f *Field) bool { return DisplayName(f, frame, all) == name }, nil
	case "byType":
		t, _ := m.Options.(string)
		return func(f *Field) bool { return string(f.Type) == t }, nil
	default:
		return nil, fmt.Errorf("field matcher %q is not modelled", m.ID)
	}
}

func names(fr *Frame, all []*Frame) []string {
	var out []string
	for _, f := range fr.Fields {
		out = append(out, DisplayName(f, fr, all)+" ("+string(f.Type)+")")
	}
	return out
}
