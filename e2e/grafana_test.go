package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	v1 "github.com/prometheus/client_golang/api/prometheus/v1"
	"github.com/prometheus/common/model"

	"github.com/xdp-exporter/xdp_exporter/dashboards"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/grafana"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
)

// xyCharts does, for every XY chart of the committed dashboard JSON, what
// Grafana does between the queries and the drawing (internal/testkit/grafana):
// the panel's Prometheus queries over [from, to] at Grafana's frame shape,
// its TestData CSV frames, its transformations, then xychart's series
// preparation. Every series config must resolve to a number x and y field
// with points, except the live series of panels that need hardware the
// lab lacks (their paper curves must resolve too). It returns each panel's live points as {series, x, y} rows.
func xyCharts(t *testing.T, prom *promtest.Server, vars dashboards.Vars, from, to time.Time) map[string][][]string {
	t.Helper()
	exempt := map[string]string{}
	for _, e := range dashboards.ExemptPanels() {
		exempt[e.Dashboard+" / "+e.Panel] = e.Reason
	}
	files, err := filepath.Glob("../dashboards/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no dashboards: %v", err)
	}
	points := map[string][][]string{}
	charts := 0
	for _, file := range files {
		d, err := grafana.LoadDashboard(file)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range d.Panels {
			if p.Type != "xychart" {
				continue
			}
			charts++
			name := d.Title + " / " + p.Title
			frames, paper := panelFrames(t, prom, p, vars, from, to)
			series, errs, err := p.Draw(t, frames)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				continue
			}
			// Only a live series of a panel needing hardware the lab lacks
			// may find nothing; the paper's curves always resolve.
			for i, err := range errs {
				reason := exempt[name]
				if i >= 0 && reason != "" && !paper[xName(p, i)] {
					t.Logf("%s: %v (exempt: %s)", name, err, reason)
					continue
				}
				t.Errorf("%s: %v", name, err)
			}
			for _, s := range series {
				n := s.Points()
				t.Logf("%s / %s: %d points", name, s.Name, n)
				if n == 0 {
					t.Errorf("%s / %s: the series resolves but draws no point", name, s.Name)
				}
				if paper[s.X.Name] {
					continue
				}
				for i := range s.X.Values {
					if s.X.Values[i] != nil && s.Y.Values[i] != nil {
						points[p.Title] = append(points[p.Title], []string{s.Name, fmt.Sprint(s.X.Values[i]), fmt.Sprintf("%.4f", s.Y.Values[i])})
					}
				}
			}
		}
	}
	if charts == 0 {
		t.Error("no XY charts in the dashboards")
	}
	return points
}

// xName is the field name series config i's x matcher selects.
func xName(p *grafana.Panel, i int) string {
	if c := p.Options.Series[i]; c.X != nil {
		name, _ := c.X.Matcher.Options.(string)
		return name
	}
	return ""
}

// panelFrames runs a panel's queries: Prometheus range queries at a 1s step
// (the lab's scrape interval) and TestData CSV content. paper holds the
// CSV column names.
func panelFrames(t *testing.T, prom *promtest.Server, p *grafana.Panel, vars dashboards.Vars, from, to time.Time) ([]*grafana.Frame, map[string]bool) {
	var frames []*grafana.Frame
	paper := map[string]bool{}
	for _, tg := range p.Targets {
		switch tg.Datasource.Type {
		case "prometheus":
			expr := dashboards.Query{Expr: tg.Expr}.Expand(vars)
			v, _, _, err := prom.API.QueryRange(context.Background(), expr, v1.Range{Start: from, End: to, Step: time.Second})
			if err != nil {
				t.Errorf("%s [%s]: %v", p.Title, tg.RefID, err)
				continue
			}
			m, _ := v.(model.Matrix)
			frames = append(frames, grafana.FromMatrix(tg.RefID, tg.LegendFormat, m)...)
		case "grafana-testdata-datasource":
			f, err := grafana.FromCSV(tg.RefID, tg.CSVContent)
			if err != nil {
				t.Errorf("%s: %v", p.Title, err)
				continue
			}
			for _, fl := range f.Fields {
				paper[fl.Name] = true
			}
			frames = append(frames, f)
		default:
			t.Errorf("%s [%s]: datasource %q is not modelled", p.Title, tg.RefID, tg.Datasource.Type)
		}
	}
	return frames, paper
}
