package dashboards

import (
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/grafana"
)

// The tests here hold the generated JSON to what Grafana does with it
// (internal/testkit/grafana, which cites the Grafana sources it follows). The
// end-to-end test runs the same checks on the frames of the real
// Prometheus; here only the TestData reference frames, which are in the
// JSON, feed them.

func loadBoards(t *testing.T) []*grafana.Dashboard {
	t.Helper()
	var out []*grafana.Dashboard
	for _, b := range boards(DefaultConfig()) {
		d, err := grafana.LoadDashboard(b.file)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, d)
	}
	return out
}

// TestPanelsHavePluginVersion: without one, Grafana runs each panel
// plugin's migration on load; xychart's drops our series.
func TestPanelsHavePluginVersion(t *testing.T) {
	for _, d := range loadBoards(t) {
		for _, p := range d.Panels {
			if p.Type != "row" && p.PluginVersion == "" {
				t.Errorf("%s / %s: no pluginVersion", d.Title, p.Title)
			}
			if _, err := p.Migrate(); err != nil {
				t.Errorf("%s: %v", d.Title, err)
			}
		}
	}
}

// xyPanels returns the xychart panels of the dashboards.
func xyPanels(t *testing.T) map[string]*grafana.Panel {
	out := map[string]*grafana.Panel{}
	for _, d := range loadBoards(t) {
		for _, p := range d.Panels {
			if p.Type == "xychart" {
				out[d.Title+" / "+p.Title] = p
			}
		}
	}
	if len(out) == 0 {
		t.Fatal("no xychart panels")
	}
	return out
}

// TestXYReferenceSeriesResolve: every paper curve of every XY chart is
// found by xychart's series preparation after the panel's transformations,
// from the TestData frames alone (the live queries return nothing here),
// and draws every point of its CSV column.
func TestXYReferenceSeriesResolve(t *testing.T) {
	for name, p := range xyPanels(t) {
		var frames []*grafana.Frame
		csvPoints := map[string]int{}
		for _, tg := range p.Targets {
			if tg.CSVContent == "" {
				continue
			}
			f, err := grafana.FromCSV(tg.RefID, tg.CSVContent)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			for _, fl := range f.Fields[1:] {
				for _, v := range fl.Values {
					if v != nil {
						csvPoints[fl.Name]++
					}
				}
			}
			frames = append(frames, f)
		}
		if len(frames) == 0 {
			t.Errorf("%s: no reference frame", name)
			continue
		}
		series, _, err := p.Draw(frames)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		found := map[string]bool{}
		for _, s := range series {
			found[s.Name] = true
			if got := s.Points(); got != csvPoints[s.Name] {
				t.Errorf("%s / %s: %d points drawn, the CSV has %d", name, s.Name, got, csvPoints[s.Name])
			}
		}
		for col := range csvPoints {
			if !found[col] {
				t.Errorf("%s: paper curve %q is not drawn (no series config resolves to it)", name, col)
			}
		}
	}
}

// TestXYAxesOwnConfig: xychart draws the x axis from the x field's config,
// and the panel-wide unit, min and max apply to every field; so each x
// field must get its unit, axis label and (where the panel sets them) min
// and max from an override, never from the y axis' defaults.
func TestXYAxesOwnConfig(t *testing.T) {
	for name, p := range xyPanels(t) {
		if len(p.Options.Series) == 0 {
			t.Errorf("%s: no series", name)
		}
		for i, s := range p.Options.Series {
			if s.X == nil || s.X.Matcher.ID != "byName" {
				t.Errorf("%s: series %d has no byName x matcher", name, i)
				continue
			}
			x, _ := s.X.Matcher.Options.(string)
			props := map[string]any{}
			for _, o := range p.FieldConfig.Overrides {
				if o.Matcher.ID == "byName" && o.Matcher.Options == x {
					for _, pr := range o.Properties {
						props[pr.ID] = pr.Value
					}
				}
			}
			for _, id := range []string{"unit", "custom.axisLabel"} {
				if props[id] == nil || props[id] == "" {
					t.Errorf("%s: x field %q has no %s of its own", name, x, id)
				}
			}
			if props["unit"] != nil && props["unit"] == p.FieldConfig.Defaults["unit"] {
				t.Errorf("%s: x field %q has the y axis' unit %v", name, x, props["unit"])
			}
			for _, id := range []string{"min", "max"} {
				if _, ok := p.FieldConfig.Defaults[id]; ok && props[id] == nil {
					t.Errorf("%s: x field %q inherits the y axis' %s", name, x, id)
				}
			}
			if strings.Contains(name, "cores") || strings.Contains(name, "queues") {
				if props["decimals"] != float64(0) {
					t.Errorf("%s: x field %q counts cores or queues but has decimals %v, not integer ticks", name, x, props["decimals"])
				}
			}
		}
	}
}

// TestLinks: every dashboard links to the other two (keeping time and
// variables), and every panel link to the runbook names a section it has.
func TestLinks(t *testing.T) {
	sections := runbookSections(t)
	ds := loadBoards(t)
	panelLinks := 0
	for _, d := range ds {
		for _, o := range ds {
			if o.UID == d.UID {
				continue
			}
			found := false
			for _, l := range d.Links {
				found = found || l.URL == "/d/"+o.UID
			}
			if !found {
				t.Errorf("%s does not link to %s", d.Title, o.Title)
			}
		}
		for _, p := range d.Panels {
			for _, l := range p.Links {
				panelLinks++
				anchor := l.URL[strings.LastIndex(l.URL, "#")+1:]
				if !strings.HasPrefix(l.URL, DefaultConfig().RunbookURL+"#") || !sections[anchor] {
					t.Errorf("%s / %s links to %s: no such runbook section", d.Title, p.Title, l.URL)
				}
			}
		}
	}
	if panelLinks == 0 {
		t.Error("no panel links to the runbook")
	}
}
