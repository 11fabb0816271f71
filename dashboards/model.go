package dashboards

import (
	"cmp"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/variants"
	"github.com/grafana/grafana-foundation-sdk/go/common"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/heatmap"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/table"
	"github.com/grafana/grafana-foundation-sdk/go/testdata"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	"github.com/grafana/grafana-foundation-sdk/go/xychart"
)

// The dashboards are described by the small model below; build turns it
// into grafana-foundation-sdk builders. Queries() reads the queries back
// from the committed JSON and the rest of a query's facts (figure axes,
// lab exemptions) from this model.

type kind int

const (
	kindTimeseries kind = iota
	kindXY
	kindHeatmap
	kindTable
)

// pluginVersion is written on every panel. Grafana runs a panel plugin's
// migration handler when the panel has none; for xychart that handler
// (public/app/plugins/panel/xychart/migrations.ts) rebuilds the options
// from the pre-10.4 format and drops our series. The value is the release
// whose panel sources the tests in internal/testkit/grafana were read against.
const pluginVersion = "11.6.0"

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
	// unit, with unitLabel naming its axis, puts a timeseries target on
	// its own right-hand axis.
	unit, unitLabel string
	// instant makes a table target an instant query in table format.
	instant bool
}

// reference is a TestData CSV frame drawn beside the live data: its first
// column is the x field, every other column a dashed "paper" curve.
type reference struct {
	refID string
	csv   string
}

// axis is an XY chart's x axis. The panel's unit, min and max apply to
// every field, the x field included (xychart reads the x axis from the x
// field's config), so the x fields get their own through overrides.
type axis struct {
	label    string
	unit     string
	min, max *float64
	// integer ticks: cores and queues are counts.
	integer bool
}

type panel struct {
	title       string
	description string
	kind        kind
	unit        string
	min, max    *float64
	width       uint32
	height      uint32
	// xAxis and yLabel are for XY charts; yLabel names the y axis.
	xAxis  axis
	yLabel string
	tool   string
	// runbook is the docs/runbook.md section (an alert name) the panel
	// links to.
	runbook string
	targets []target
	refs    []reference
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
	title string
	// tool is the terminal tool the row's panels replace; a panel's own
	// tool overrides it.
	tool   string
	panels []panel
}

type board struct {
	uid         string
	title       string
	description string
	file        string
	multiHost   bool // instance is multi-select (fleet)
	runbookURL  string
	references  bool // has TestData reference series
	// devices are the series whose device label fills $device
	// (deviceSources when empty).
	devices string
	rows    []row
}

func ptr[T any](v T) *T { return &v }

var (
	promDS  = common.DataSourceRef{Type: ptr("prometheus"), Uid: ptr("${datasource}")}
	refDS   = common.DataSourceRef{Type: ptr("grafana-testdata-datasource"), Uid: ptr("${reference}")}
	mixedDS = common.DataSourceRef{Type: ptr("datasource"), Uid: ptr("-- Mixed --")}
)

// deviceSources are the families whose device label fills $device.
const deviceSources = `xdp_rxq_info|xdp_nic_driver_info|xdp_napi_poll_work_count|xdp_netdev_qstats_rx_packets_total|xdp_bpf_prog_info`

// queryVariable is a label_values variable; "All" is a regex matching
// every value, and the empty value too (a series without a cluster label).
func queryVariable(name, query string, multi bool, all string) *dashboard.QueryVariableBuilder {
	v := dashboard.NewQueryVariableBuilder(name).Label(name).Datasource(promDS).
		Query(dashboard.StringOrMap{String: ptr(query)}).
		Refresh(dashboard.VariableRefreshOnTimeRangeChanged).Sort(dashboard.VariableSortAlphabeticalAsc)
	if multi {
		v = v.Multi(true).IncludeAll(true).AllValue(all)
	}
	return v
}

// variables follow node-mixin's: datasource, cluster and job (the
// Prometheus labels that tell fleets and scrape jobs apart), then the
// exporter's instance and device.
func variables(b board) []cog.Builder[dashboard.VariableModel] {
	vars := []cog.Builder[dashboard.VariableModel]{
		dashboard.NewDatasourceVariableBuilder("datasource").Label("Prometheus").Type("prometheus"),
	}
	if b.references {
		vars = append(vars, dashboard.NewDatasourceVariableBuilder("reference").
			Label("Paper reference (TestData)").Type("grafana-testdata-datasource").
			Description("A TestData datasource (Connections > Add new connection > TestData, no settings) that draws the paper's measured curves."))
	}
	for _, v := range variableQueries(b) {
		vars = append(vars, queryVariable(v.name, v.query, v.multi, v.all))
	}
	return vars
}

// variableQuery is a label_values variable of a board.
type variableQuery struct {
	name, query string
	multi       bool
	all         string
}

// variableQueries are the label_values variables of b.
func variableQueries(b board) []variableQuery {
	devices := cmp.Or(b.devices, deviceSources)
	return []variableQuery{
		{"cluster", `label_values(xdp_scrape_collector_success, cluster)`, true, ".*"},
		{"job", `label_values(xdp_scrape_collector_success{cluster=~"$cluster"}, job)`, true, ".+"},
		{"instance", `label_values(xdp_scrape_collector_success{cluster=~"$cluster",job=~"$job"}, instance)`, b.multiHost, ".+"},
		{"device", `label_values({__name__=~"` + devices + `",` + selInst + `}, device)`, true, ".*"},
	}
}

func promTarget(t target, k kind) cog.Builder[variants.Dataquery] {
	q := prometheus.NewDataqueryBuilder().RefId(t.refID).Expr(t.expr).Datasource(promDS)
	switch {
	case t.instant:
		q = q.Instant().Format(prometheus.PromQueryFormatTable)
	case k == kindHeatmap:
		q = q.Range().Format(prometheus.PromQueryFormatHeatmap)
	default:
		q = q.Range()
	}
	if t.legend != "" {
		q = q.LegendFormat(t.legend)
	}
	return q
}

func targets(p panel) []cog.Builder[variants.Dataquery] {
	var out []cog.Builder[variants.Dataquery]
	for _, t := range p.targets {
		out = append(out, promTarget(t, p.kind))
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

// xySeries is one drawn series of an XY chart, by the display names of its
// x and y fields.
type xySeries struct {
	x, y       string
	xRef, yRef string // refIDs of a live series' queries
	paper      bool
}

// series lists an XY chart's series: the live ones in target order (an x
// and a y target per series name), then each reference's columns.
func (p panel) series() []xySeries {
	var out []xySeries
	byName := map[string]int{}
	for _, t := range p.targets {
		i, ok := byName[t.series]
		if !ok {
			i = len(out)
			byName[t.series] = i
			out = append(out, xySeries{})
		}
		if t.axis == "x" {
			out[i].x, out[i].xRef = t.legend, t.refID
		} else {
			out[i].y, out[i].yRef = t.legend, t.refID
		}
	}
	for _, r := range p.refs {
		cols := strings.Split(strings.SplitN(r.csv, "\n", 2)[0], ",")
		for _, c := range cols[1:] {
			out = append(out, xySeries{x: cols[0], y: c, paper: true})
		}
	}
	return out
}

func matcher(id string, options any) cog.Builder[xychart.MatcherConfig] {
	return xychart.NewMatcherConfigBuilder().Id(id).Options(options)
}

// buildXY lays an XY chart out so that the frames' arrival order does not
// matter (a mixed panel's datasources answer in any order): each live
// series' x and y queries are joined on time (inner, so a row has both),
// then every frame is concatenated into one, so every series is frame 0
// and is found by its fields' display names: the legends of its queries,
// the column names of the CSV.
func buildXY(p panel, id, w, h uint32) cog.Builder[dashboard.Panel] {
	// Live points are scrapes in time order, so they are not joined by
	// lines; the paper's curves are, dashed.
	b := xychart.NewPanelBuilder().Id(id).Title(p.title).Description(description(p)).
		Span(w).Height(h).Targets(targets(p)).
		Mapping(xychart.SeriesMappingManual).Show(xychart.XYShowModePoints).
		Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
			DisplayMode(common.LegendDisplayModeList).Placement(common.LegendPlacementBottom)).
		Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeSingle))
	if len(p.refs) > 0 {
		b = b.Datasource(mixedDS)
	} else {
		b = b.Datasource(promDS)
	}
	var series []cog.Builder[xychart.XYSeriesConfig]
	xNames := map[string]bool{}
	for _, s := range p.series() {
		series = append(series, xychart.NewXYSeriesConfigBuilder().
			Frame(xychart.NewXychartXYSeriesConfigFrameBuilder().Matcher(matcher("byIndex", 0))).
			X(xychart.NewXychartXYSeriesConfigXBuilder().Matcher(matcher("byName", s.x))).
			Y(xychart.NewXychartXYSeriesConfigYBuilder().Matcher(matcher("byName", s.y))))
		if !s.paper {
			b = b.WithTransformation(dashboard.DataTransformerConfig{
				Id:      "joinByField",
				Filter:  &dashboard.MatcherConfig{Id: "byRefId", Options: s.xRef + "|" + s.yRef},
				Options: map[string]any{"mode": "inner", "byField": "Time"},
			})
		} else {
			b = b.OverrideByName(s.y, []dashboard.DynamicConfigValue{
				{Id: "custom.show", Value: xychart.XYShowModePointsAndLines},
				{Id: "custom.lineStyle", Value: map[string]any{"fill": "dash", "dash": []int{10, 10}}},
			})
		}
		if !xNames[s.x] {
			xNames[s.x] = true
			b = b.OverrideByName(s.x, xAxisProperties(p.xAxis))
		}
	}
	b = b.Series(series).WithTransformation(dashboard.DataTransformerConfig{
		Id: "concatenate", Options: map[string]any{"frameNameMode": "drop"},
	})
	b = withScale(b, p)
	if p.yLabel != "" {
		b = b.AxisLabel(p.yLabel)
	}
	return b
}

// scaled is a panel builder with the panel-wide unit, min and max.
type scaled[B any] interface {
	Unit(string) B
	Min(float64) B
	Max(float64) B
}

func withScale[B scaled[B]](b B, p panel) B {
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

func xAxisProperties(a axis) []dashboard.DynamicConfigValue {
	props := []dashboard.DynamicConfigValue{{Id: "unit", Value: a.unit}, {Id: "custom.axisLabel", Value: a.label}}
	if a.min != nil {
		props = append(props, dashboard.DynamicConfigValue{Id: "min", Value: *a.min})
	}
	if a.max != nil {
		props = append(props, dashboard.DynamicConfigValue{Id: "max", Value: *a.max})
	}
	if a.integer {
		props = append(props, dashboard.DynamicConfigValue{Id: "decimals", Value: 0})
	}
	return props
}

func buildPanel(p panel, id uint32, runbookURL string) cog.Builder[dashboard.Panel] {
	w, h := p.width, p.height
	if w == 0 {
		w = 12
	}
	if h == 0 {
		h = 8
	}
	var links []cog.Builder[dashboard.DashboardLink]
	if p.runbook != "" {
		links = append(links, dashboard.NewDashboardLinkBuilder("Runbook: "+p.runbook).
			Type(dashboard.DashboardLinkTypeLink).Url(runbookURL+"#"+strings.ToLower(p.runbook)).TargetBlank(true))
	}
	switch p.kind {
	case kindXY:
		return buildXY(p, id, w, h)
	case kindHeatmap:
		return heatmap.NewPanelBuilder().Id(id).Title(p.title).Description(description(p)).
			Span(w).Height(h).Datasource(promDS).Targets(targets(p)).Links(links).
			Calculate(false).
			YAxis(heatmap.NewYAxisConfigBuilder().Unit(p.unit)).
			RowsFrame(heatmap.NewRowsHeatmapOptionsBuilder().Layout(common.HeatmapCellLayoutLe)).
			Color(heatmap.NewHeatmapColorOptionsBuilder().Mode(heatmap.HeatmapColorModeScheme).
				Scheme("Oranges").Scale(heatmap.HeatmapColorScaleExponential).Exponent(0.5).Steps(64))
	case kindTable:
		b := table.NewPanelBuilder().Id(id).Title(p.title).Description(description(p)).
			Span(w).Height(h).Datasource(promDS).Targets(targets(p)).Links(links).
			Filterable(true).OverrideByName("Time", []dashboard.DynamicConfigValue{{Id: "custom.hidden", Value: true}})
		if p.unit != "" {
			b = b.OverrideByName("Value", []dashboard.DynamicConfigValue{{Id: "unit", Value: p.unit}})
		}
		return b
	default:
		b := timeseries.NewPanelBuilder().Id(id).Title(p.title).Description(description(p)).
			Span(w).Height(h).Datasource(promDS).Targets(targets(p)).Links(links).
			Legend(common.NewVizLegendOptionsBuilder().ShowLegend(true).
				DisplayMode(common.LegendDisplayModeTable).Placement(common.LegendPlacementRight).
				Calcs([]string{"mean", "max"})).
			Tooltip(common.NewVizTooltipOptionsBuilder().Mode(common.TooltipDisplayModeMulti).Sort(common.SortOrderDescending)).
			FillOpacity(10).ShowPoints(common.VisibilityModeNever)
		b = withScale(b, p)
		for _, t := range p.targets {
			if t.unit != "" {
				// A second quantity (frames per bulk next to packets/s)
				// gets its own unit and, with it, its own axis.
				b = b.OverrideByQuery(t.refID, []dashboard.DynamicConfigValue{
					{Id: "unit", Value: t.unit},
					{Id: "custom.axisPlacement", Value: "right"},
					{Id: "custom.axisLabel", Value: t.unitLabel},
				})
			}
		}
		return b
	}
}

func build(b board, boards []board) (dashboard.Dashboard, error) {
	d := dashboard.NewDashboardBuilder(b.title).Uid(b.uid).Description(b.description).
		Tags([]string{"xdp", "xdp_exporter"}).Editable().
		Refresh("10s").Time("now-30m", "now").Timezone("browser").
		Tooltip(dashboard.DashboardCursorSyncCrosshair).
		Variables(variables(b))
	// The other dashboards, keeping the time range and the variables, as
	// the mixins link theirs.
	for _, o := range boards {
		if o.uid != b.uid {
			d = d.Link(dashboard.NewDashboardLinkBuilder(o.title).Type(dashboard.DashboardLinkTypeLink).
				Url("/d/" + o.uid).IncludeVars(true).KeepTime(true).Icon("dashboard"))
		}
	}
	// Rows stay expanded, and Grafana keeps an expanded row's panels only
	// when they follow it at the top level, not inside it.
	id := uint32(0)
	for _, r := range b.rows {
		id++
		d = d.WithRow(dashboard.NewRowBuilder(r.title).Id(id).Collapsed(false))
		for _, p := range r.panels {
			id++
			d = d.WithPanel(buildPanel(p, id, b.runbookURL))
		}
	}
	out, err := d.Build()
	if err != nil {
		return out, err
	}
	for _, p := range out.Panels {
		if p.Panel == nil {
			continue
		}
		p.Panel.PluginVersion = ptr(pluginVersion)
		// The SDK's table builder sets a hidden footer, an option the
		// table panel no longer has (@grafana/schema 13's table
		// Options; Grafana 12 moved footers into the field config): no
		// footer is what Grafana draws without it too.
		if o, ok := p.Panel.Options.(*table.Options); ok {
			o.Footer = nil
		}
	}
	return out, nil
}
