package grafana

import (
	"encoding/csv"
	"fmt"
	"math"
	"regexp"
	"sort"
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
	DisplayName       string // config.displayName
	DisplayNameFromDS string // config.displayNameFromDS
	Values            []any
}

// Frame is a Grafana data frame.
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

// DisplayName is a field's name as matchers, legends and the groupBy and
// organize transformations see it: getFieldDisplayName and
// calculateFieldDisplayName in packages/grafana-data/src/field/fieldState.ts.
// The config's displayName wins, then the datasource's displayNameFromDS;
// a time field keeps its name; otherwise the frame name (when frame names
// differ), the field name unless it is "Value", and the labels (the value
// of the only label name when all frames have just one) make the name, and
// a field name two fields of the frame share gets a " 1", " 2" suffix.
func DisplayName(field *Field, frame *Frame, all []*Frame) string {
	if field.DisplayName != "" {
		return field.DisplayName
	}
	if field.DisplayNameFromDS != "" {
		return field.DisplayNameFromDS
	}
	if field.Type == TypeTime && len(field.Labels) == 0 {
		if field.Name == "" {
			return "Time"
		}
		return field.Name
	}
	var parts []string
	namesDiffer := false
	for i := 1; i < len(all); i++ {
		if all[i].Name != all[i-1].Name {
			namesDiffer = true
			break
		}
	}
	frameNameAdded, labelsAdded := false, false
	if namesDiffer && frame != nil && frame.Name != "" {
		parts = append(parts, frame.Name)
		frameNameAdded = true
	}
	if field.Name != "" && field.Name != "Value" {
		parts = append(parts, field.Name)
	}
	if len(field.Labels) > 0 && frame != nil {
		frames := all
		if frames == nil {
			frames = []*Frame{frame}
		}
		if single := singleLabelName(frames); single == "" {
			parts = append(parts, formatLabels(field.Labels))
			labelsAdded = true
		} else if v, ok := field.Labels[single]; ok {
			parts = append(parts, v)
			labelsAdded = true
		}
	}
	if frame != nil && !frameNameAdded && !labelsAdded && field.Name == "Value" && frame.Name != "" {
		parts = append(parts, frame.Name)
	}
	name := "Value"
	switch {
	case len(parts) > 0:
		name = strings.Join(parts, " ")
	case field.Name != "":
		name = field.Name
	}
	if name == field.Name {
		return uniqueName(field, frame)
	}
	return name
}

// uniqueName is getUniqueFieldName (fieldState.ts): fields of a frame
// that share a name are "name 1", "name 2", ... in field order.
func uniqueName(field *Field, frame *Frame) string {
	if frame == nil {
		return field.Name
	}
	dupes, self := 0, false
	for _, f := range frame.Fields {
		if f == field {
			self = true
			if dupes > 0 {
				dupes++
				break
			}
		} else if f.Name == field.Name {
			dupes++
			if self {
				break
			}
		}
	}
	if dupes == 0 {
		return field.Name
	}
	return field.Name + " " + strconv.Itoa(dupes)
}

func singleLabelName(frames []*Frame) string {
	single := ""
	for _, fr := range frames {
		for _, f := range fr.Fields {
			for k := range f.Labels {
				if single == "" {
					single = k
				} else if k != single {
					return ""
				}
			}
		}
	}
	return single
}

// formatLabels is formatLabels in packages/grafana-data/src/utils/labels.ts:
// {a="1", b="2"} with the names sorted, __name__ in front without a key.
func formatLabels(labels map[string]string) string {
	keys := make([]string, 0, len(labels))
	for k := range labels {
		if k != "__name__" {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(labels["__name__"])
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(k + `="` + labels[k] + `"`)
	}
	b.WriteByte('}')
	return b.String()
}
