package grafana

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
)

func num(name string, vals ...any) *Field { return &Field{Name: name, Type: TypeNumber, Values: vals} }
func times(vals ...any) *Field            { return &Field{Name: "Time", Type: TypeTime, Values: vals} }

// apply runs transformations on frames through Grafana's code.
func apply(t *testing.T, frames []*Frame, ts ...Transformation) []*Frame {
	t.Helper()
	out, err := (&Panel{Title: t.Name(), Transformations: ts}).Apply(t, frames)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func displayNames(f *Frame) []string {
	var out []string
	for _, fl := range f.Fields {
		out = append(out, fl.Display)
	}
	return out
}

// Prometheus' range result becomes one frame per series, named by the
// legend through displayNameFromDS (pkg/promlib/querydata/response.go),
// and Grafana names the fields so.
func TestFromMatrix(t *testing.T) {
	m := model.Matrix{{
		Metric: model.Metric{"cpu": "3"},
		Values: []model.SamplePair{{Timestamp: 1000, Value: 1.5}, {Timestamp: 2000, Value: 2.5}},
	}, {
		Metric: model.Metric{"__name__": "up", "cpu": "4"},
		Values: []model.SamplePair{{Timestamp: 1000, Value: 1}},
	}}
	fs := apply(t, FromMatrix("A", "cpu {{cpu}} {{ missing }}", m))
	if len(fs) != 2 {
		t.Fatalf("%d frames, want 2", len(fs))
	}
	if got := displayNames(fs[0]); !reflect.DeepEqual(got, []string{"Time", "cpu 3 "}) {
		t.Errorf("display names %q", got)
	}
	if fs[1].Fields[1].Name != "up" || fs[0].Fields[1].Name != "Value" || fs[0].RefID != "A" {
		t.Errorf("value field names %q %q", fs[0].Fields[1].Name, fs[1].Fields[1].Name)
	}
	if !reflect.DeepEqual(fs[0].Fields[0].Values, []any{int64(1000), int64(2000)}) {
		t.Errorf("times %v", fs[0].Fields[0].Values)
	}
}

// Without displayNameFromDS Grafana builds the name from the field name
// and labels, and numbers duplicate names.
func TestDisplayName(t *testing.T) {
	a := &Field{Name: "Value", Type: TypeNumber, Labels: map[string]string{"cpu": "1"}, Values: []any{1.0}}
	b := &Field{Name: "Value", Type: TypeNumber, Labels: map[string]string{"cpu": "2", "mode": "idle"}, Values: []any{2.0}}
	if got := displayNames(apply(t, []*Frame{{Fields: []*Field{a, b}}})[0]); !reflect.DeepEqual(got, []string{`{cpu="1"}`, `{cpu="2", mode="idle"}`}) {
		t.Errorf("labels: %q", got)
	}
	dup := &Frame{Fields: []*Field{times(int64(1)), times(int64(1)), num("x", 1.0), num("x", 1.0), num("y", 1.0)}}
	if got := displayNames(apply(t, []*Frame{dup})[0]); !reflect.DeepEqual(got, []string{"Time", "Time", "x 1", "x 2", "y"}) {
		t.Errorf("duplicates: %q", got)
	}
}

// joinByField, as the figures use it: inner keeps the times both frames
// have, outer every time with nulls; a filter leaves the other frames
// where the first of them was.
func TestJoinByField(t *testing.T) {
	x := &Frame{RefID: "A", Fields: []*Field{times(int64(1), int64(2), int64(3)), {Name: "Value", Type: TypeNumber, DisplayNameFromDS: "cores", Values: []any{1.0, 2.0, 2.0}}}}
	y := &Frame{RefID: "B", Fields: []*Field{times(int64(2), int64(3), int64(4)), {Name: "Value", Type: TypeNumber, DisplayNameFromDS: "Mpps", Values: []any{5.0, 6.0, 7.0}}}}
	r := &Frame{RefID: "R", Fields: []*Field{num("cores (paper)", 1.0)}}
	join := func(mode string) []*Frame {
		return apply(t, []*Frame{r, x, y}, Transformation{ID: "joinByField", Filter: &Matcher{ID: "byRefId", Options: "A|B"},
			Options: map[string]any{"byField": "Time", "mode": mode}})
	}
	in := join("inner")
	if len(in) != 2 || in[0].RefID != "R" {
		t.Fatalf("inner: %d frames, first %v; want the reference frame back in front", len(in), in[0].RefID)
	}
	if got := in[1].Fields[1].Values; !reflect.DeepEqual(got, []any{2.0, 2.0}) {
		t.Errorf("inner cores %v", got)
	}
	if got := displayNames(in[1]); !reflect.DeepEqual(got, []string{"Time", "cores", "Mpps"}) {
		t.Errorf("inner names %q", got)
	}
	if got := join("outer")[1].Fields[2].Values; !reflect.DeepEqual(got, []any{nil, 5.0, 6.0, 7.0}) {
		t.Errorf("outer Mpps %v", got)
	}
}

// The frames a filtered transformation leaves out go back where the first
// of them was, except that one at index 0 does not set the position:
// transformDataFrame.ts's postProcessTransform.
func TestFilteredFramesPosition(t *testing.T) {
	frame := func(id string) *Frame {
		return &Frame{RefID: id, Fields: []*Field{times(int64(1)), num(id, 1.0)}}
	}
	got := apply(t, []*Frame{frame("A"), frame("B"), frame("C"), frame("D")},
		Transformation{ID: "joinByField", Filter: &Matcher{ID: "byRefId", Options: "B|C"}, Options: map[string]any{"mode": "outer"}})
	var ids []string
	for _, f := range got {
		ids = append(ids, f.RefID)
	}
	if strings.Join(ids, " ") != "joinByField-B-C A D" {
		t.Errorf("order %v, want the joined frame, A, D", ids)
	}
}

// concatenate pads the shorter fields and, in drop mode, keeps names.
func TestConcatenate(t *testing.T) {
	one := &Frame{Name: "live", Fields: []*Field{num("x", 1.0, 2.0, 3.0)}}
	two := &Frame{Name: "paper", Fields: []*Field{num("cores (paper)", 1.0)}}
	out := apply(t, []*Frame{one, two}, Transformation{ID: "concatenate", Options: map[string]any{"frameNameMode": "drop"}})
	if len(out) != 1 || !reflect.DeepEqual(out[0].Fields[1].Values, []any{1.0, nil, nil}) || out[0].Fields[1].Name != "cores (paper)" {
		t.Errorf("concatenated: %+v", out[0].Fields[1])
	}
	if named := apply(t, []*Frame{one, two}, Transformation{ID: "concatenate"}); named[0].Fields[1].Name != "paper · cores (paper)" {
		t.Errorf("default mode name %q", named[0].Fields[1].Name)
	}
}

// Field matchers and overrides are Grafana's: byName on the display name,
// byType on the type; later overrides win.
func TestOverrides(t *testing.T) {
	p := &Panel{Title: "overrides", FieldConfig: FieldConfig{Overrides: []Override{
		{Matcher: Matcher{ID: "byName", Options: "cores"}, Properties: []Property{{ID: "unit", Value: "none"}, {ID: "decimals", Value: 0.0}}},
		{Matcher: Matcher{ID: "byType", Options: "number"}, Properties: []Property{{ID: "unit", Value: "pps"}}},
	}}}
	fr := &Frame{Fields: []*Field{times(int64(1)), {Name: "Value", Type: TypeNumber, DisplayNameFromDS: "cores", Values: []any{1.0}}, num("Mpps", 2.0)}}
	out, err := p.Apply(t, []*Frame{fr})
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Overrides(out[0].Fields[1]); !reflect.DeepEqual(got, map[string]any{"unit": "pps", "decimals": 0.0}) {
		t.Errorf("cores: %v", got)
	}
	if got := p.Overrides(out[0].Fields[0]); len(got) != 0 {
		t.Errorf("the time field: %v", got)
	}
}

// prepSeries: manual series need frame, x and y; the x and y are number
// fields their matchers select; a name no field has resolves to nothing.
func TestPrepSeries(t *testing.T) {
	ref := func(id string, o any) *MatcherRef { return &MatcherRef{Matcher: Matcher{ID: id, Options: o}} }
	p := &Panel{Title: "xy", Type: "xychart", PluginVersion: "11.6.0", Options: PanelOptions{Mapping: "manual", Series: []SeriesConfig{
		{Frame: ref("byIndex", 0.0), X: ref("byName", "cores"), Y: ref("byName", "Mpps")},
		{Frame: ref("byIndex", 0.0), X: ref("byName", "cores"), Y: ref("byName", "label")},
		{Frame: ref("byIndex", 1.0), X: ref("byName", "cores"), Y: ref("byName", "Mpps")},
		{X: ref("byName", "cores"), Y: ref("byName", "Mpps")},
	}}}
	fr := &Frame{Fields: []*Field{times(int64(1), int64(2)), num("cores", 1.0, 2.0), num("Mpps", nil, 3.0), {Name: "label", Type: TypeString, Values: []any{"a", "b"}}}}
	series, errs, err := p.Draw(t, []*Frame{fr})
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != 1 || series[0].Name != "Mpps" || series[0].Points() != 1 {
		t.Errorf("series %+v", series)
	}
	if len(errs) != 3 || errs[1] == nil || errs[2] == nil || errs[3] == nil {
		t.Errorf("errors %v, want configs 1 (string y), 2 (frame index out of range), 3 (no frame matcher)", errs)
	}
}

// A panel without pluginVersion is migrated, and ours would lose its
// series (migrations.ts).
func TestMigrate(t *testing.T) {
	p := &Panel{Type: "xychart", Title: "t", Options: PanelOptions{Mapping: "manual", Series: []SeriesConfig{{}}}}
	if _, err := p.Migrate(); err == nil {
		t.Error("no error for an xychart without pluginVersion")
	}
	p.PluginVersion = "11.6.0"
	if o, err := p.Migrate(); err != nil || len(o.Series) != 1 {
		t.Errorf("with pluginVersion: %v %v", o, err)
	}
}
