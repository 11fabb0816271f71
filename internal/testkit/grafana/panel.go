package grafana

import (
	"encoding/json"
	"fmt"
	"os"
)

// Dashboard is the part of a dashboard JSON file the tests read.
type Dashboard struct {
	UID    string   `json:"uid"`
	Title  string   `json:"title"`
	Links  []Link   `json:"links"`
	Panels []*Panel `json:"panels"`
}

// Link is a dashboard or panel link.
type Link struct {
	URL string `json:"url"`
}

// Panel is a dashboard panel.
type Panel struct {
	Type            string           `json:"type"`
	Title           string           `json:"title"`
	PluginVersion   string           `json:"pluginVersion"`
	Targets         []Target         `json:"targets"`
	Transformations []Transformation `json:"transformations"`
	Options         PanelOptions     `json:"options"`
	FieldConfig     FieldConfig      `json:"fieldConfig"`
	Links           []Link           `json:"links"`
}

// Datasource is a datasource reference.
type Datasource struct {
	Type string `json:"type"`
}

// Target is one query of a panel: Prometheus (Expr) or TestData CSV
// content (CSVContent).
type Target struct {
	RefID        string     `json:"refId"`
	Datasource   Datasource `json:"datasource"`
	Expr         string     `json:"expr"`
	LegendFormat string     `json:"legendFormat"`
	CSVContent   string     `json:"csvContent"`
}

// PanelOptions holds the xychart options (mapping, series) and is empty
// for the other panel types the tests read.
type PanelOptions struct {
	Mapping string         `json:"mapping"`
	Series  []SeriesConfig `json:"series"`
}

// SeriesConfig is one manual xychart series.
type SeriesConfig struct {
	Frame *MatcherRef `json:"frame"`
	X     *MatcherRef `json:"x"`
	Y     *MatcherRef `json:"y"`
}

// MatcherRef wraps a matcher as xychart's series config does.
type MatcherRef struct {
	Matcher Matcher `json:"matcher"`
}

// FieldConfig is a panel's field configuration.
type FieldConfig struct {
	Defaults  map[string]any `json:"defaults"`
	Overrides []Override     `json:"overrides"`
}

// Override is one field override.
type Override struct {
	Matcher    Matcher    `json:"matcher"`
	Properties []Property `json:"properties"`
}

// Property is one overridden field config property.
type Property struct {
	ID    string `json:"id"`
	Value any    `json:"value"`
}

// LoadDashboard reads a dashboard JSON file. Panels of rows come first in
// Panels as Grafana lays out expanded rows (rows are panels of type "row").
func LoadDashboard(path string) (*Dashboard, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var d Dashboard
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &d, nil
}

// Matcher is a frame or field matcher of the dashboard JSON.
type Matcher struct {
	ID      string `json:"id"`
	Options any    `json:"options,omitempty"`
}

// Transformation is one entry of a panel's "transformations", as the
// dashboard JSON holds it and @grafana/data's transformDataFrame takes it.
type Transformation struct {
	ID       string         `json:"id"`
	Disabled bool           `json:"disabled,omitempty"`
	Filter   *Matcher       `json:"filter,omitempty"`
	Options  map[string]any `json:"options,omitempty"`
}
