package grafana

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
)

// Matcher is a frame or field matcher of the dashboard JSON.
type Matcher struct {
	ID      string `json:"id"`
	Options any    `json:"options,omitempty"`
}

// Transformation is one entry of a panel's "transformations".
type Transformation struct {
	ID       string         `json:"id"`
	Disabled bool           `json:"disabled,omitempty"`
	Filter   *Matcher       `json:"filter,omitempty"`
	Options  map[string]any `json:"options,omitempty"`
}

// Transform applies a panel's transformations in order, as
// transformDataFrame in
// packages/grafana-data/src/transformations/transformDataFrame.ts does: a
// transformation with a filter sees only the frames the filter matches,
// and the frames it did not see go back into its output at the position
// of the first of them.
func Transform(ts []Transformation, frames []*Frame) ([]*Frame, error) {
	for _, t := range ts {
		if t.Disabled {
			continue
		}
		in := frames
		var keep func(*Frame) bool
		if t.Filter != nil {
			m, err := frameMatcher(*t.Filter)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", t.ID, err)
			}
			keep = m
			in = nil
			for _, f := range frames {
				if m(f) {
					in = append(in, f)
				}
			}
		}
		out, err := apply(t, in)
		if err != nil {
			return nil, err
		}
		// The filtered input is a new array, so Grafana's "after ===
		// before" shortcut never holds with a filter: the frames left out
		// always go back.
		if keep != nil {
			out = reinsert(frames, out, keep)
		}
		frames = out
	}
	return frames, nil
}

// reinsert is postProcessTransform's "add back the filtered out frames",
// including its quirk: the insert position is the index of the first
// frame left out, except that a frame left out at index 0 does not set it.
func reinsert(before, after []*Frame, matched func(*Frame) bool) []*Frame {
	insert := 0
	var left []*Frame
	for i, f := range before {
		if !matched(f) {
			if insert == 0 {
				insert = i
			}
			left = append(left, f)
		}
	}
	if len(left) == 0 {
		return after
	}
	if insert > len(after) {
		insert = len(after)
	}
	out := append([]*Frame{}, after[:insert]...)
	out = append(out, left...)
	return append(out, after[insert:]...)
}

// frameMatcher supports byRefId (packages/grafana-data/src/transformations/
// matchers/refIdMatcher.ts): "A|B" is the anchored union of the names, a
// plain name matches itself.
func frameMatcher(m Matcher) (func(*Frame) bool, error) {
	if m.ID != "byRefId" {
		return nil, fmt.Errorf("frame matcher %q is not modelled", m.ID)
	}
	pattern, _ := m.Options.(string)
	if strings.HasPrefix(pattern, "/") {
		return nil, fmt.Errorf("regular expression refId matcher %q is not modelled", pattern)
	}
	if strings.Contains(pattern, "|") {
		names := strings.Split(pattern, "|")
		for i, n := range names {
			names[i] = regexp.QuoteMeta(n)
		}
		re := regexp.MustCompile("^(?:" + strings.Join(names, "|") + ")$")
		return func(f *Frame) bool { return re.MatchString(f.RefID) }, nil
	}
	return func(f *Frame) bool { return f.RefID == pattern }, nil
}

func apply(t Transformation, frames []*Frame) ([]*Frame, error) {
	switch t.ID {
	case "joinByField":
		return joinByField(t.Options, frames)
	case "concatenate":
		return concatenate(t.Options, frames)
	default:
		return nil, fmt.Errorf("transformation %q is not modelled", t.ID)
	}
}

// joinByField is packages/grafana-data/src/transformations/transformers/
// joinByField.ts with joinDataFrames.ts: with more than one frame, the
// frames are joined on the field named byField (by display name; the first
// time field when unset), "outer" keeping every key and "inner" only keys
// all frames have, sorted ascending. A single frame passes unchanged.
// Fields keep their config and labels. joinDataFrames also renames the
// fields of named frames; our frames have no names, so a named one is an
// error here.
func joinByField(opts map[string]any, frames []*Frame) ([]*Frame, error) {
	if len(frames) < 2 {
		return frames, nil
	}
	by, _ := opts["byField"].(string)
	mode, _ := opts["mode"].(string)
	if mode == "" {
		mode = "outer"
	}
	if mode != "outer" && mode != "inner" {
		return nil, fmt.Errorf("joinByField mode %q is not modelled", mode)
	}
	type side struct {
		frame *Frame
		join  int
		rows  map[int64]int
	}
	var sides []side
	for _, fr := range frames {
		if fr.Name != "" {
			return nil, fmt.Errorf("joinByField: named frame %q is not modelled", fr.Name)
		}
		j := -1
		for i, f := range fr.Fields {
			if by == "" && f.Type == TypeTime || by != "" && DisplayName(f, fr, frames) == by {
				j = i
				break
			}
		}
		if j < 0 {
			return nil, fmt.Errorf("joinByField: frame %q has no field %q to join on", fr.RefID, by)
		}
		rows := map[int64]int{}
		for r, v := range fr.Fields[j].Values {
			k, err := joinKey(v)
			if err != nil {
				return nil, err
			}
			rows[k] = r
		}
		sides = append(sides, side{fr, j, rows})
	}
	count := map[int64]int{}
	for _, s := range sides {
		for k := range s.rows {
			count[k]++
		}
	}
	var keys []int64
	for k, n := range count {
		if mode == "outer" || n == len(sides) {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })

	first := sides[0].frame.Fields[sides[0].join]
	joinField := *first
	joinField.Values = make([]any, len(keys))
	for i, k := range keys {
		joinField.Values[i] = k
	}
	out := &Frame{Fields: []*Field{&joinField}}
	for _, s := range sides {
		for i, f := range s.frame.Fields {
			if i == s.join {
				continue
			}
			c := *f
			c.Values = make([]any, len(keys))
			for r, k := range keys {
				if row, ok := s.rows[k]; ok {
					c.Values[r] = f.Values[row]
				}
			}
			out.Fields = append(out.Fields, &c)
		}
	}
	return []*Frame{out}, nil
}

// joinKey is a time (milliseconds) as a map key; the dashboards join on
// time only.
func joinKey(v any) (int64, error) {
	if t, ok := v.(int64); ok {
		return t, nil
	}
	return 0, fmt.Errorf("joinByField: join value %v is not a time: not modelled", v)
}

// concatenate is packages/grafana-data/src/transformations/transformers/
// concat.ts: every field of every frame side by side in one frame, shorter
// fields padded with nulls (undefined in Grafana; neither draws). With
// frameNameMode "drop" field names stay as they were; the default,
// "field", puts a named frame's name into the field name.
func concatenate(opts map[string]any, frames []*Frame) ([]*Frame, error) {
	if len(frames) < 2 {
		return frames, nil
	}
	mode, _ := opts["frameNameMode"].(string)
	switch mode {
	case "":
		mode = "field"
	case "drop", "field":
	default:
		return nil, fmt.Errorf("concatenate frameNameMode %q is not modelled", mode)
	}
	n := 0
	for _, fr := range frames {
		n = max(n, fr.Len())
	}
	out := &Frame{}
	for _, fr := range frames {
		for _, f := range fr.Fields {
			c := *f
			if fr.Name != "" && mode == "field" {
				if c.Name == "" || c.Name == "Value" {
					c.Name = fr.Name
				} else {
					c.Name = fr.Name + " · " + f.Name
				}
			}
			c.Values = append(make([]any, 0, n), f.Values...)
			for len(c.Values) < n {
				c.Values = append(c.Values, nil)
			}
			out.Fields = append(out.Fields, &c)
		}
	}
	return []*Frame{out}, nil
}
