package uncore

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"
)

// Format is one file of a PMU's sysfs format/ directory: the
// perf_event_attr field a term fills and the bits it fills, in the order
// the term's value fills them ("config:8-15,32-57": the value's low 8
// bits go to config bits 8-15, the next 26 to bits 32-57).
type Format struct {
	Field string // config, config1 or config2
	Bits  []uint
}

// ParseFormat reads a format file's content, as the kernel's
// DEFINE_UNCORE_FORMAT_ATTR writes it.
func ParseFormat(s string) (Format, error) {
	field, spec, ok := strings.Cut(strings.TrimSpace(s), ":")
	if !ok || (field != "config" && field != "config1" && field != "config2") {
		return Format{}, fmt.Errorf("format %q: want config, config1 or config2 and a bit list", s)
	}
	f := Format{Field: field}
	var used uint64
	for _, r := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(r, "-")
		a, err := strconv.ParseUint(lo, 10, 8)
		b := a
		if err == nil && isRange {
			b, err = strconv.ParseUint(hi, 10, 8)
		}
		if err != nil || b < a || b > 63 {
			return Format{}, fmt.Errorf("format %q: bad bit range %q", s, r)
		}
		for bit := a; bit <= b; bit++ {
			if used&(1<<bit) != 0 {
				return Format{}, fmt.Errorf("format %q: bit %d twice", s, bit)
			}
			used |= 1 << bit
			f.Bits = append(f.Bits, uint(bit))
		}
	}
	return f, nil
}

// place scatters v over the format's bits, as perf's pmu_format_value
// does; a value wider than the format is an error, not a truncation.
func (f Format) place(v uint64) (uint64, error) {
	if bits.Len64(v) > len(f.Bits) {
		return 0, fmt.Errorf("value %#x is wider than the format's %d bits", v, len(f.Bits))
	}
	var out uint64
	for i, bit := range f.Bits {
		out |= (v >> i & 1) << bit
	}
	return out, nil
}

// Term is one name=value of a perf event string.
type Term struct {
	Name  string
	Value uint64
}

// ParseTerms reads a perf event string ("event=0xff,umask=0x20"), as a
// PMU's events/ files and perf's JSON give them; a name alone means 1.
func ParseTerms(s string) ([]Term, error) {
	var out []Term
	for _, part := range strings.Split(strings.TrimSpace(s), ",") {
		name, val, hasValue := strings.Cut(strings.TrimSpace(part), "=")
		if name == "" {
			return nil, fmt.Errorf("event %q: empty term", s)
		}
		t := Term{Name: name, Value: 1}
		if hasValue {
			v, err := strconv.ParseUint(val, 0, 64)
			if err != nil {
				return nil, fmt.Errorf("event %q: term %s: %w", s, name, err)
			}
			t.Value = v
		}
		out = append(out, t)
	}
	return out, nil
}

// Attr is what perf_event_open(2) is given of an event.
type Attr struct {
	Type                     uint32
	Config, Config1, Config2 uint64
}

// Encode builds the perf_event_attr of terms through formats, as perf
// does: a term named in formats fills its bits, config, config1 and
// config2 set those fields whole, and any other term is an error (perf
// refuses an event whose term the PMU does not define).
func Encode(typ uint32, formats map[string]Format, terms []Term) (Attr, error) {
	a := Attr{Type: typ}
	fields := map[string]*uint64{"config": &a.Config, "config1": &a.Config1, "config2": &a.Config2}
	for _, t := range terms {
		if p, raw := fields[t.Name]; raw {
			*p |= t.Value
			continue
		}
		f, ok := formats[t.Name]
		if !ok {
			return Attr{}, fmt.Errorf("term %s: the PMU has no such format", t.Name)
		}
		v, err := f.place(t.Value)
		if err != nil {
			return Attr{}, fmt.Errorf("term %s: %w", t.Name, err)
		}
		*fields[f.Field] |= v
	}
	return a, nil
}
