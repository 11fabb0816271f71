package dashboards

import (
	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/testdata"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/xychart"
)

// The dashboards are described by the small model below; build turns it
// into grafana-foundation-sdk builders and Queries() reads the same model,
// so the exported query list cannot drift from the JSON.

type kind int

const (
	kindTimeseries kind = iota
	kindXY
	kindHeatmap
)

// target is one PromQL query of a panel.
type target struct {
	refID  string
	expr   string
	legend string
	// axis is "x" or "y" in an XY panel: the lead's sweep test pairs an x
	// and a y target of the same series by their timestamps.
	axis   string
	series string
	// exempt and needs override the panel's for this target.
	exempt string
	needs  string
}

// reference is a TestData CSV frame drawn beside the live data.
type reference struct {
	refID string
	csv   string
}

type panel struct {
	title       string
	description string
	kind        kind
	unit        string
	min, max    *float64
	width       uint32
	height      uint32
	targets     []target
	refs        []reference
	// joins lists groups of refIDs each joined on time into one frame, so
	// an XY chart sees x and y of a live series as fields of one frame.
	joins []string
	// exempt says why the panel cannot return data in the veth lab.
	exempt string
	// needs says what the lab must do for the panel to return data (an
	// event counter that exists only after its first event).
	needs string
}

type row struct {
	title  string
	panels []panel
}

type board struct {
	uid         string
	title       string
	description string
	file        string
	multiHost   bool // instance is multi-select (fleet)
	references  bool // has TestData reference series
	rows        []row
}

func ptr[T any](v T) *T { return &v }

var (
	promDS  = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}
	refDS   = common.DataSourceRef{Type: ptr("grafana-testdata-datasource"), Uid: ptr("${reference}")}
	mixedDS = common.DataSourceRef{Type: ptr("datasource"), Uid: ptr("-- Mixed --")}
)

// deviceSources are the families whose device label fills $device.
const deviceSources = `xdp_rxq_info|xdp_ethtool_driver_info|xdp_napi_poll_work_count|xdp_netdev_qstats_rx_packets_total|xdp_bpf_prog_info`

func variables(b board) []cog.Builder[dashboard.VariableModel] {
	vars := []cog.Builder[dashboard.VariableModel]{
		dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus"),
	}
	if b.references {
		vars = append(vars, dashboard.NewDatasourceVariableBuilder("reference").
			Label("Paper reference (TestData)").Type("grafana-testdata-datasource").
			Description("A TestData datasource (Connections > Add new connection > TestData, no settings) that draws the paper's measured curves."))
	}
	instance := dashboard.NewQueryVariableBuilder("instance").Label("instance").
		Datasource(promDS).
		Query(dashboard.StringOrMap{String: ptr("label_values(xdp_scrape_collector_success, instance)")}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)
	if b.multiHost {
		instance = instance.Multi(true).IncludeAll(true).AllValue(".+")
	}
	device := dashboard.NewQueryVariableBuilder("device").Label("device").
		Datasource(promDS).
		Query(dashboard.StringOrMap{String: ptr(`label_values({__name__=~"` + deviceSources + `",instance=~"$instance"}, device)`)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc).
		Multi(true).IncludeAll(true).AllValue(".*")
	return append(vars, instance, device)
}

func promTarget(t target, heat bool) cog.Builder[variants.Dataquery] {
	q := prometheus.NewDataqueryBuilder().RefId(t.refID).Expr(t.expr).Datasource(promDS).Range()
	if t.legend != "" {
		q = q.LegendFormat(t.legend)
	}
	if heat {
		q = q.Format(prometheus.PromQueryFormatHeatmap)
	}
	return q
}

func targets(p panel) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for _, t := range p.targets {
		out = append(out, promTarget(t, p.kind == kindHeatmap))
	}
	for _, r := range p.refs {
		out = append(out, testdata.NewDataqueryBuilder().RefId(r.refID).Datasource(refDS).
			ScenarioId(testdata.DataqueryScenarioIdCsvContent).CsvContent(r.csv))
	}
	return out
}

func description(p panel) string {
	d := p.description
	if p.exempt != "" {
		d += "\n\nNeeds: " + p.exempt + "."
	}
	return d
}

func buildPanel(p panel, id uint32) cog.Builder[dashboard.Panel] {
	w, h := p.width, p.height
	if w == 0 {
		w = 12
	}
	if h == 0 {
		h = 8
	}
	switch p.kind {
	case kindXY:
		// Live points are scrapes in time order, so they are not joined by
		// lines; the paper's curves are.
		b := xychart.NewPanelBuilder().Id(id).Title(p.title).Description(description(p)).
			Span(w).Height(h).Targets(targets(p)).
			Mapping(xychart.SeriesMappingAuto).Show(xychart.XYShowModePoints).
			Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
				DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle))
		for _, r := range p.refs {
			b = b.OverrideByQuery(r.refID, []dashboard.DynamicConfigValue{{Id: "custom.show", Value: xychart.XYShowModePointsAndLines}})
		}
		if len(p.refs) > 0 {
			b = b.Datasource(mixedDS)
		} else {
			b = b.Datasource(promDS)
		}
		for _, j := range p.joins {
			b = b.WithTransformation(dashboard.DataTransformerConfig{
				Id:      "joinByField",
				Filter:  &dashboard.MatcherConfig{Id: "byRefId", Options: j},
				Options: map[string]any{"mode": "outer", "byField": "Time"},
			})
		}
		if p.unit != "" {
			b = b.Unit(p.unit)
		}
		if p.min != nil {
			b = b.Min(*p.min)
		}
		if p.max != nil {
			b = b.Max(*p.max)
		}
		return b
	case kindHeatmap:
		return heatmap.NewPanelBuilder().Id(id).Title(p.title).Description(description(p)).
			Span(w).Height(h).Datasource(promDS).Targets(targets(p)).
			Calculate(false).
			YAxis(heatmap.NewYAxisConfigBuilder().Unit(p.unit)).
			RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutLe)).
			Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).
				Scheme("Oranges").Scale(heatmap.HeatmapColorScaleExponential).Exponent(0.5).Steps(64))
	default:
		b := timeseries.NewPanelBuilder().Id(id).Title(p.title).Description(description(p)).
			Span(w).Height(h).Datasource(promDS).Targets(targets(p)).
			Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
				DisplayMode(common.LegendDisplayModeTable).Placement(common.LegendPlacementRight).
				Calcs([]string{"mean", "max"})).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)).
			FillOpacity(10).ShowPoints(common.VisibilityModeNever)
		if p.unit != "" {
			b = b.Unit(p.unit)
		}
		if p.min != nil {
			b = b.Min(*p.min)
		}
		if p.max != nil {
			b = b.Max(*p.max)
		}
		return b
	}
}

func build(b board) (dashboard.Dashboard, error) {
	d := dashboard.NewDashboardBuilder(b.title).Uid(b.uid).Description(b.description).
		Tags([]string{"xdp", "xdp_exporter"}).Editable().
		Refresh("10s").Time("now-30m", "now").Timezone("browser").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Variables(variables(b))
	// Rows stay expanded, and Grafana keeps an expanded row's panels only
	// when they follow it at the top level, not inside it.
	id := uint32(0)
	for _, r := range b.rows {
		id++
		d = d.WithRow(dashboard.NewRowBuilder(r.title).Id(id).Collapsed(false))
		for _, p := range r.panels {
			id++
			d = d.WithPanel(buildPanel(p, id))
		}
	}
	return d.Build()
}
