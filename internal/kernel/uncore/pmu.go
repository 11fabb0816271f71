package uncore

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/cpulist"
)

// The PMU kinds this package counts with.
const (
	KindCHA         = "cha"              // caching and home agent: LLC slice, TOR inserts
	KindIIO         = "iio"              // integrated I/O stack: one PCIe root complex
	KindFreeRunning = "iio_free_running" // the IIO stack's free-running bandwidth counters
)

// pmuName matches the uncore PMUs the kernel's Intel uncore driver
// registers: uncore_<kind>_<box>, or uncore_<kind> alone for a kind with
// one box.
var pmuName = regexp.MustCompile(`^uncore_(cha|iio|iio_free_running)(?:_([0-9]+))?$`)

// PMU is one uncore PMU box as sysfs describes it under
// bus/event_source/devices.
type PMU struct {
	Name    string // uncore_iio_3
	Kind    string
	Box     int
	Type    uint32 // perf_event_attr.type
	CPUs    []int  // cpumask: one CPU per die to open the box's events on
	Formats map[string]Format
	dir     string
}

// ErrNoPMU is returned by Discover on a host whose kernel registered no
// Intel uncore PMU: a VM, a desktop or non-Intel CPU, a kernel without
// CONFIG_PERF_EVENTS_INTEL_UNCORE.
// It is not supported here (errors.ErrUnsupported).
var ErrNoPMU = fmt.Errorf("%w: no Intel uncore PMU (uncore_cha_*, uncore_iio_*) in sysfs", errors.ErrUnsupported)

// Discover lists the CHA, IIO and free-running IIO PMUs under
// sys/bus/event_source/devices, sorted by kind and box.
func Discover(sys string) ([]*PMU, error) {
	root := filepath.Join(sys, "bus", "event_source", "devices")
	entries, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("%w (%v)", ErrNoPMU, err)
	}
	var out []*PMU
	for _, e := range entries {
		m := pmuName.FindStringSubmatch(e.Name())
		if m == nil {
			continue
		}
		p := &PMU{Name: e.Name(), Kind: m[1], dir: filepath.Join(root, e.Name())}
		if m[2] != "" {
			p.Box, _ = strconv.Atoi(m[2])
		}
		if err := p.read(); err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, ErrNoPMU
	}
	slices.SortFunc(out, func(a, b *PMU) int {
		if c := strings.Compare(a.Kind, b.Kind); c != 0 {
			return c
		}
		return a.Box - b.Box
	})
	return out, nil
}

func (p *PMU) read() error {
	s, err := readTrimmed(filepath.Join(p.dir, "type"))
	if err != nil {
		return err
	}
	t, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return fmt.Errorf("%s/type: %q: %w", p.Name, s, err)
	}
	p.Type = uint32(t)
	if p.CPUs, err = cpulist.Read(filepath.Join(p.dir, "cpumask")); err != nil {
		return fmt.Errorf("%s/cpumask: %w", p.Name, err)
	}
	files, err := os.ReadDir(filepath.Join(p.dir, "format"))
	if err != nil {
		return fmt.Errorf("%s: %w", p.Name, err)
	}
	p.Formats = map[string]Format{}
	for _, f := range files {
		s, err := readTrimmed(filepath.Join(p.dir, "format", f.Name()))
		if err != nil {
			return err
		}
		if p.Formats[f.Name()], err = ParseFormat(s); err != nil {
			return fmt.Errorf("%s/format/%s: %w", p.Name, f.Name(), err)
		}
	}
	return nil
}

// Encode builds the attr of a perf event string on this PMU.
func (p *PMU) Encode(event string) (Attr, error) {
	terms, err := ParseTerms(event)
	if err != nil {
		return Attr{}, err
	}
	a, err := Encode(p.Type, p.Formats, terms)
	if err != nil {
		return Attr{}, fmt.Errorf("%s: %s: %w", p.Name, event, err)
	}
	return a, nil
}

// NamedEvent is an event the kernel names in the PMU's events/
// directory, with the scale and unit it gives the counts.
type NamedEvent struct {
	Name  string
	Attr  Attr
	Scale float64 // 1 where the kernel gives none
	Unit  string
}

// NamedEvents reads the PMU's events/ files whose names start with
// prefix (bw_in_port), sorted by name.
func (p *PMU) NamedEvents(prefix string) ([]NamedEvent, error) {
	dir := filepath.Join(p.dir, "events")
	files, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []NamedEvent
	for _, f := range files {
		name := f.Name()
		if !strings.HasPrefix(name, prefix) || strings.Contains(name, ".") {
			continue
		}
		s, err := readTrimmed(filepath.Join(dir, name))
		if err != nil {
			return nil, err
		}
		e := NamedEvent{Name: name, Scale: 1}
		if e.Attr, err = p.Encode(s); err != nil {
			return nil, err
		}
		if s, err := readTrimmed(filepath.Join(dir, name+".scale")); err == nil {
			if e.Scale, err = strconv.ParseFloat(s, 64); err != nil {
				return nil, fmt.Errorf("%s/events/%s.scale: %w", p.Name, name, err)
			}
		}
		e.Unit, _ = readTrimmed(filepath.Join(dir, name+".unit"))
		out = append(out, e)
	}
	return out, nil
}

// rootBusFile matches the IIO PMU's die<N> attributes: the PCI segment
// and root bus of the box's stack on logical die N, as "%04x:%02x"
// (arch/x86/events/intel/uncore_snbep.c, Linux 5.10+).
var rootBusFile = regexp.MustCompile(`^die([0-9]+)$`)

// RootBuses reads the die<N> files: logical die -> "0000:3a". A kernel
// or model without the mapping has none, and the map is empty.
func (p *PMU) RootBuses() (map[int]string, error) {
	files, err := os.ReadDir(p.dir)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	for _, f := range files {
		m := rootBusFile.FindStringSubmatch(f.Name())
		if m == nil {
			continue
		}
		s, err := readTrimmed(filepath.Join(p.dir, f.Name()))
		if err != nil {
			return nil, err
		}
		die, _ := strconv.Atoi(m[1])
		out[die] = s
	}
	return out, nil
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}
