package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/grafana"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// The tests here hold the generated JSON to what Grafana does with it:
// Grafana's own @grafana/data and @grafana/schema where they say it, and
// for what Grafana keeps under the AGPL the models of
// internal/testkit/grafana, which cite the Grafana sources they follow.
// The end-to-end test runs the same checks on the frames of the real
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

// referenceFrames are the TestData frames of an XY chart's paper curves,
// and the points of each CSV column.
func referenceFrames(t *testing.T, name string, p *grafana.Panel) ([]*grafana.Frame, map[string]int) {
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
	}
	return frames, csvPoints
}

// liveFrames stand for what the panel's Prometheus queries return: for
// each, one series at one instant, named by its legend as the datasource
// names it (grafana.FromMatrix).
func liveFrames(p *grafana.Panel) []*grafana.Frame {
	var out []*grafana.Frame
	for _, tg := range p.Targets {
		if tg.Datasource.Type == "prometheus" {
			out = append(out, grafana.FromMatrix(tg.RefID, tg.LegendFormat, model.Matrix{{Metric: model.Metric{}, Values: []model.SamplePair{{Timestamp: 1000, Value: 1}}}})...)
		}
	}
	return out
}

// transformedRecording is every XY chart's reference frames after the
// panel's transformations, by Grafana's code: a change of a panel's
// transformations, or of what @grafana/data does with them, shows here.
var transformedRecording = filepath.Join("testdata", "xy-transformed.json")

// TestXYReferenceSeriesResolve: every series of every XY chart is found
// by xychart's series preparation after the panel's transformations, from
// the TestData frames and a point of each live query (liveFrames); every
// paper curve draws every point of its CSV column, and every x axis has
// its own config (checkXAxis). The transformed frames equal the recording
// (XDP_EXPORTER_RECORD=1 rewrites it).
func TestXYReferenceSeriesResolve(t *testing.T) {
	transformed := map[string][]*grafana.Frame{}
	for name, p := range xyPanels(t) {
		frames, csvPoints := referenceFrames(t, name, p)
		if len(frames) == 0 {
			continue
		}
		frames = append(frames, liveFrames(p)...)
		series, errs, err := p.Draw(t, frames)
		if err != nil {
			t.Errorf("%s: %v", name, err)
			continue
		}
		if transformed[name], err = p.Apply(t, frames); err != nil {
			t.Fatal(err)
		}
		for i, err := range errs {
			t.Errorf("%s: series %d: %v", name, i, err)
		}
		found := map[string]bool{}
		for _, s := range series {
			found[s.Name] = true
			if want, paper := csvPoints[s.Name]; paper && s.Points() != want {
				t.Errorf("%s / %s: %d points drawn, the CSV has %d", name, s.Name, s.Points(), want)
			}
			checkXAxis(t, name, p, s.X)
		}
		for col := range csvPoints {
			if !found[col] {
				t.Errorf("%s: paper curve %q is not drawn (no series config resolves to it)", name, col)
			}
		}
	}
	got, err := json.MarshalIndent(transformed, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	if testenv.Recording() {
		if err := os.WriteFile(transformedRecording, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(transformedRecording)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("the XY charts' transformed reference frames differ from %s; make generate RECORD=1 records them", transformedRecording)
	}
}

// checkXAxis: xychart draws the x axis from the x field's config, and the
// panel-wide unit, min and max apply to every field; so each x field must
// get its unit, axis label and (where the panel sets them) min and max
// from an override that selects it, never from the y axis' defaults.
func checkXAxis(t *testing.T, name string, p *grafana.Panel, x *grafana.Field) {
	props := p.Overrides(x)
	for _, id := range []string{"unit", "custom.axisLabel"} {
		if props[id] == nil || props[id] == "" {
			t.Errorf("%s: x field %q has no %s of its own", name, x.Display, id)
		}
	}
	if props["unit"] != nil && props["unit"] == p.FieldConfig.Defaults["unit"] {
		t.Errorf("%s: x field %q has the y axis' unit %v", name, x.Display, props["unit"])
	}
	for _, id := range []string{"min", "max"} {
		if _, ok := p.FieldConfig.Defaults[id]; ok && props[id] == nil {
			t.Errorf("%s: x field %q inherits the y axis' %s", name, x.Display, id)
		}
	}
	if (strings.Contains(name, "cores") || strings.Contains(name, "queues")) && props["decimals"] != float64(0) {
		t.Errorf("%s: x field %q counts cores or queues but has decimals %v, not integer ticks", name, x.Display, props["decimals"])
	}
}

// TestSchema holds the dashboards to @grafana/schema of the version the
// tests run: its schemaVersion, and for every panel only option names its
// panel type's Options declare.
func TestSchema(t *testing.T) {
	schema, err := grafana.LoadSchema(t)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range boards(DefaultConfig()) {
		raw, err := os.ReadFile(b.file)
		if err != nil {
			t.Fatal(err)
		}
		var d struct {
			SchemaVersion int `json:"schemaVersion"`
			Panels        []struct {
				Type, Title string
				Options     map[string]any
			}
		}
		if err := json.Unmarshal(raw, &d); err != nil {
			t.Fatal(err)
		}
		if d.SchemaVersion != schema.SchemaVersion {
			t.Errorf("%s: schemaVersion %d, @grafana/schema's is %d", b.file, d.SchemaVersion, schema.SchemaVersion)
		}
		for _, p := range d.Panels {
			if p.Type == "row" {
				continue
			}
			names, ok := schema.Options[p.Type]
			if !ok {
				t.Errorf("%s / %s: @grafana/schema has no options of panel type %q", b.file, p.Title, p.Type)
				continue
			}
			for opt := range p.Options {
				if !slices.Contains(names, opt) {
					t.Errorf("%s / %s: option %q is not one of the %s panel's %v", b.file, p.Title, opt, p.Type, names)
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
