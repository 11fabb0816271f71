package grafana

import (
	"reflect"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
)

func num(name string, vals ...any) *Field { return &Field{Name: name, Type: TypeNumber, Values: vals} }
func times(vals ...any) *Field            { return &Field{Name: "Time", Type: TypeTime, Values: vals} }

func displayNames(f *Frame, all []*Frame) []string {
	var out []string
	for _, fl := range f.Fields {
		out = append(out, DisplayName(fl, f, all))
	}
	return out
}

// Prometheus' range result becomes one frame per series, named by the
// legend through displayNameFromDS (pkg/promlib/querydata/response.go).
func TestFromMatrix(t *testing.T) {
	m := model.Matrix{{
		Metric: model.Metric{"cpu": "3"},
		Values: []model.SamplePair{{Timestamp: 1000, Value: 1.5}, {Timestamp: 2000, Value: 2.5}},
	}, {
		Metric: model.Metric{"__name__": "up", "cpu": "4"},
		Values: []model.SamplePair{{Timestamp: 1000, Value: 1}},
	}}
	fs := FromMatrix("A", "cpu {{cpu}} {{ missing }}", m)
	if len(fs) != 2 {
		t.Fatalf("%d frames, want 2", len(fs))
	}
	if got := displayNames(fs[0], fs); !reflect.DeepEqual(got, []string{"Time", "cpu 3 "}) {
		t.Errorf("display names %q", got)
	}
	if fs[1].Fields[1].Name != "up" || fs[0].Fields[1].Name != "Value" || fs[0].RefID != "A" {
		t.Errorf("value field names %q %q", fs[0].Fields[1].Name, fs[1].Fields[1].Name)
	}
	if !reflect.DeepEqual(fs[0].Fields[0].Values, []any{int64(1000), int64(2000)}) {
		t.Errorf("times %v", fs[0].Fields[0].Values)
	}
}

// Without displayNameFromDS the name is built from the field name and
// labels (fieldState.ts), and duplicate names are numbered.
func TestDisplayName(t *testing.T) {
	a := &Field{Name: "Value", Type: TypeNumber, Labels: map[string]string{"cpu": "1"}}
	b := &Field{Name: "Value", Type: TypeNumber, Labels: map[string]string{"cpu": "2", "mode": "idle"}}
	fr := &Frame{Fields: []*Field{a, b}}
	if got := displayNames(fr, []*Frame{fr}); !reflect.DeepEqual(got, []string{`{cpu="1"}`, `{cpu="2", mode="idle"}`}) {
		t.Errorf("labels: %q", got)
	}
	dup := &Frame{Fields: []*Field{times(), times(), num("x"), num("x"), num("y")}}
	if got := displayNames(dup, nil); !reflect.DeepEqual(got, []string{"Time", "Time", "x 1", "x 2", "y"}) {
		t.Errorf("duplicates: %q", got)
	}
}

// joinByField: inner keeps the times both frames have, outer every time
// with nulls; a filter leaves the other frames where the first of them was.
func TestJoinByField(t *testing.T) {
	x := &Frame{RefID: "A", Fields: []*Field{times(int64(1), int64(2), int64(3)), {Name: "Value", Type: TypeNumber, DisplayNameFromDS: "cores", Values: []any{1.0, 2.0, 2.0}}}}
	y := &Frame{RefID: "B", Fields: []*Field{times(int64(2), int64(3), int64(4)), {Name: "Value", Type: TypeNumber, DisplayNameFromDS: "Mpps", Values: []any{5.0, 6.0, 7.0}}}}
	r := &Frame{RefID: "R", Fields: []*Field{num("cores (paper)", 1.0)}}
	join := func(mode string) []*Frame {
		out, err := Transform([]Transformation{{ID: "joinByField", Filter: &Matcher{ID: "byRefId", Options: "A|B"},
			Options: map[string]any{"byField": "Time", "mode": mode}}}, []*Frame{r, x, y})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	in := join("inner")
	if len(in) != 2 || in[0] != r {
		t.Fatalf("inner: %d frames, first %v; want the reference frame back in front", len(in), in[0].RefID)
	}
	if got := in[1].Fields[1].Values; !reflect.DeepEqual(got, []any{2.0, 2.0}) {
		t.Errorf("inner cores %v", got)
	}
	if got := displayNames(in[1], in); !reflect.DeepEqual(got, []string{"Time", "cores", "Mpps"}) {
		t.Errorf("inner names %q", got)
	}
	out := join("outer")
	if got := out[1].Fields[2].Values; !reflect.DeepEqual(got, []any{nil, 5.0, 6.0, 7.0}) {
		t.Errorf("outer Mpps %v", got)
	}
}

// The reinsertion quirk of transformDataFrame.ts: a frame left out at index
// 0 does not set the insert position, a later one does.
func TestReinsertPosition(t *testing.T) {
	a, b, c, d := &Frame{RefID: "A"}, &Frame{RefID: "B"}, &Frame{RefID: "C"}, &Frame{RefID: "D"}
	joined := &Frame{RefID: "J"}
	got := reinsert([]*Frame{a, b, c, d}, []*Frame{joined}, func(f *Frame) bool { return f == b || f == c })
	var ids []string
	for _, f := range got {
		ids = append(ids, f.RefID)
	}
	if strings.Join(ids, "") != "JAD" {
		t.Errorf("order %v, want J A D (insert at index 3, clipped to the end)", ids)
	}
}

// concatenate pads the shorter fields and, in drop mode, keeps names.
func TestConcatenate(t *testing.T) {
	one := &Frame{Name: "live", Fields: []*Field{num("x", 1.0, 2.0, 3.0)}}
	two := &Frame{Name: "paper", Fields: []*Field{num("cores (paper)", 1.0)}}
	out, err := Transform([]Transformation{{ID: "concatenate", Options: map[string]any{"frameNameMode": "drop"}}}, []*Frame{one, two})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 1 || !reflect.DeepEqual(out[0].Fields[1].Values, []any{1.0, nil, nil}) || out[0].Fields[1].Name != "cores (paper)" {
		t.Errorf("concatenated: %+v", out[0].Fields[1])
	}
	named, _ := Transform([]Transformation{{ID: "concatenate"}}, []*Frame{one, two})
	if named[0].Fields[1].Name != "paper · cores (paper)" {
		t.Errorf("default mode name %q", named[0].Fields[1].Name)
	}
	for _, tr := range []Transformation{
		{ID: "organize"},
		{ID: "concatenate", Options: map[string]any{"frameNameMode": "label"}},
		{ID: "joinByField"}, // of named frames
	} {
		if _, err := Transform([]Transformation{tr}, []*Frame{one, two}); err == nil {
			t.Errorf("unmodelled %+v passed", tr)
		}
	}
}

// prepSeries: manual series need frame, x and y; the x and y are number
// fields found by display name; a name no field has resolves to nothing.
func TestPrepSeries(t *testing.T) {
	fr := &Frame{Fields: []*Field{times(int64(1), int64(2)), num("cores", 1.0, 2.0), num("Mpps", nil, 3.0), {Name: "label", Type: TypeString, Values: []any{"a", "b"}}}}
	ref := func(id string, o any) *MatcherRef { return &MatcherRef{Matcher: Matcher{ID: id, Options: o}} }
	opts := PanelOptions{Mapping: "manual", Series: []SeriesConfig{
		{Frame: ref("byIndex", 0.0), X: ref("byName", "cores"), Y: ref("byName", "Mpps")},
		{Frame: ref("byIndex", 0.0), X: ref("byName", "cores"), Y: ref("byName", "label")},
		{Frame: ref("byIndex", 1.0), X: ref("byName", "cores"), Y: ref("byName", "Mpps")},
		{X: ref("byName", "cores"), Y: ref("byName", "Mpps")},
	}}
	series, errs := PrepSeries(opts, []*Frame{fr})
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
