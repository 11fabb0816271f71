package grafana

import (
	"encoding/csv"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"

	"github.com/prometheus/common/model"
)

// FieldType is a data frame field's type as Grafana names it.
type FieldType string

const (
	TypeTime   FieldType = "time"
	TypeNumber FieldType = "number"
	TypeString FieldType = "string"
)

// Field is one column of a frame. Values holds float64 for numbers, int64
// milliseconds for times, string for strings and nil for a null.
type Field struct {
	Name              string
	Type              FieldType
	Labels            map[string]string
	DisplayNameFromDS string // config.displayNameFromDS
	Values            []any
	// Display and Matched are Grafana's (Panel.Apply): the field's
	// display name, and the keys of the panel's field matchers that
	// select it.
	Display string
	Matched []string
}

// Frame is a Grafana data frame as the datasources return it (FromMatrix,
// FromCSV) and the panel's transformations leave it (Panel.Apply).
type Frame struct {
	Name   string
	RefID  string
	Fields []*Field
}

// Len is the number of rows.
func (f *Frame) Len() int {
	if len(f.Fields) == 0 {
		return 0
	}
	return len(f.Fields[0].Values)
}

// FromMatrix converts a Prometheus range query result the way Grafana's
// Prometheus datasource does (pkg/promlib/converter/prom.go and
// addMetadataToMultiFrame in pkg/promlib/querydata/response.go, the
// "timeseries-multi" frames of Grafana 11 and 12): one frame per series
// with a "Time" and a number field, the value field named after __name__
// if the series has one and "Value" otherwise, carrying the series' labels
// and, when the query has a legend format, the expanded legend as
// displayNameFromDS.
func FromMatrix(refID, legend string, m model.Matrix) []*Frame {
	var out []*Frame
	for _, s := range m {
		t := &Field{Name: "Time", Type: TypeTime}
		v := &Field{Name: "Value", Type: TypeNumber, Labels: map[string]string{}}
		for k, val := range s.Metric {
			v.Labels[string(k)] = string(val)
		}
		if n, ok := v.Labels["__name__"]; ok {
			v.Name = n
		}
		if legend != "" {
			v.DisplayNameFromDS = expandLegend(legend, v.Labels)
		}
		for _, p := range s.Values {
			t.Values = append(t.Values, int64(p.Timestamp))
			f := float64(p.Value)
			if math.IsNaN(f) {
				v.Values = append(v.Values, nil)
			} else {
				v.Values = append(v.Values, f)
			}
		}
		out = append(out, &Frame{RefID: refID, Fields: []*Field{t, v}})
	}
	return out
}

var legendLabel = regexp.MustCompile(`\{\{\s*(.+?)\s*\}\}`)

// expandLegend is the datasource's legend formatting: {{label}} becomes
// the label's value, or nothing when the series lacks it.
func expandLegend(legend string, labels map[string]string) string {
	return legendLabel.ReplaceAllStringFunc(legend, func(m string) string {
		return labels[legendLabel.FindStringSubmatch(m)[1]]
	})
}

// FromCSV parses a TestData "CSV content" query's text the way the TestData
// datasource does (pkg/tsdb/grafana-testdata-datasource/csv_data.go): the
// first row names the fields, a column whose cells all parse as numbers
// (empty cells are nulls) is a number field, any other a string field.
func FromCSV(refID, content string) (*Frame, error) {
	rows, err := csv.NewReader(strings.NewReader(content)).ReadAll()
	if err != nil {
		return nil, fmt.Errorf("CSV content of %s: %w", refID, err)
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("CSV content of %s is empty", refID)
	}
	f := &Frame{RefID: refID}
	for col, name := range rows[0] {
		field := &Field{Name: name, Type: TypeNumber}
		for _, r := range rows[1:] {
			if col >= len(r) || r[col] == "" {
				field.Values = append(field.Values, nil)
				continue
			}
			v, err := strconv.ParseFloat(r[col], 64)
			if err != nil {
				field.Type = TypeString
				break
			}
			field.Values = append(field.Values, v)
		}
		if field.Type == TypeString {
			field.Values = field.Values[:0]
			for _, r := range rows[1:] {
				field.Values = append(field.Values, r[col])
			}
		}
		f.Fields = append(f.Fields, field)
	}
	return f, nil
}
