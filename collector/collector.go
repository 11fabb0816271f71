// Package collector holds one collector per kernel source and the machinery
// that runs them on every scrape.
//
// A collector owns its kernel objects (links, maps, sockets) and releases them
// in Close. Collectors get an explicit configuration struct; the only package
// state is the list of registrations, so tests can build collectors directly
// and run in parallel.
package collector

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sort"
	"strings"

	"github.com/alecthomas/kingpin/v2"
	"github.com/prometheus/client_golang/prometheus"
)

// Namespace prefixes every metric the exporter produces.
const Namespace = "xdp"

// Collector is one source of metrics.
//
// Update is called once per scrape, possibly concurrently with itself (two
// Prometheus servers scraping at once), and must honour ctx: when the scrape
// times out its metrics are discarded and the goroutine should stop soon.
// links is the scrape's dump of the namespace's devices, which every
// collector of the scrape shares.
type Collector interface {
	Update(ctx context.Context, links *LinkSnapshot, ch chan<- prometheus.Metric) error
	Close() error
}

// asCollector returns a constructor's collector as a Collector, and no
// collector at all (not a typed nil) when it failed.
func asCollector[T Collector](c T, err error) (Collector, error) {
	if err != nil {
		return nil, err
	}
	return c, nil
}

// Builder constructs a collector from the flag values parsed for it and
// what the exporter's flags give every collector.
type Builder func(logger *slog.Logger, shared Shared) (Collector, error)

// Shared is what every collector's builder gets besides its own flags:
// the filter of its --collector.NAME.metrics-* and device-* flags, and
// the mount points of --path.procfs and --path.sysfs (node_exporter's
// names), for an exporter that sees the host's file systems elsewhere (a
// container).
type Shared struct {
	Filter        Filter
	ProcFS, SysFS string
}

// The mount points of --path.procfs and --path.sysfs by default, and of a
// collector whose config names none.
const (
	defaultProcFS = "/proc"
	defaultSysFS  = "/sys"
)

func procRoot(path string) string { return cmp.Or(path, defaultProcFS) }
func sysRoot(path string) string  { return cmp.Or(path, defaultSysFS) }

// Registration describes a collector: its name (used in --collector.NAME and
// in the collector label), whether it runs by default, and a function that
// declares its own flags under --collector.NAME.* and returns the builder
// bound to their values.
type Registration struct {
	Name           string
	Help           string
	DefaultEnabled bool
	// Requires says which kernel, driver and privileges the collector needs;
	// METRICS.md prints it.
	Requires string
	// ScrapeCapabilities lists the capabilities (unix.CAP_*) Update still
	// needs once the constructor has returned, e.g. CAP_SYS_ADMIN for
	// BPF_PROG_GET_NEXT_ID, or CAP_BPF for reading a map through its fd:
	// before Linux 5.19 ("bpf: refine kernel.unprivileged_bpf_disabled
	// behaviour") kernel.unprivileged_bpf_disabled, set by default on the
	// distributions' kernels, refuses every bpf(2) command without it.
	// --runtime.drop-capabilities keeps these and drops every other.
	ScrapeCapabilities []int
	// DeviceLabel says the collector's series name devices: it then has
	// --collector.NAME.device-include and -exclude, the latter defaulting
	// to DeviceExclude.
	DeviceLabel   bool
	DeviceExclude string
	// MetricsExclude is the default of --collector.NAME.metrics-exclude.
	MetricsExclude string
	Flags          func(f *FlagSet) Builder
}

var registrations = map[string]Registration{}

// register is called from the init function of each collector's file.
func register(r Registration) {
	if _, dup := registrations[r.Name]; dup {
		panic("collector: duplicate registration " + r.Name)
	}
	registrations[r.Name] = r
}

// Registrations returns every known collector sorted by name.
func Registrations() []Registration {
	out := make([]Registration, 0, len(registrations))
	for _, r := range registrations {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// FlagSet scopes a collector's flags under --collector.NAME.*.
type FlagSet struct {
	app  *kingpin.Application
	name string
	set  map[string]*bool // flag name -> given on the command line
	// filter builds the collector's Filter from the parsed flags.
	filter func() (Filter, error)
}

// Flag declares --collector.NAME.<flag>.
func (f *FlagSet) Flag(flag, help string) *kingpin.FlagClause {
	name := "collector." + f.name + "." + flag
	given := new(bool)
	f.set[name] = given
	return f.app.Flag(name, help).IsSetByUser(given)
}

// Given returns, as --collector.NAME.FLAG, those of flags given on the
// command line.
func (f *FlagSet) Given(flags ...string) []string {
	var out []string
	for _, flag := range flags {
		name := "collector." + f.name + "." + flag
		if set := f.set[name]; set != nil && *set {
			out = append(out, "--"+name)
		}
	}
	return out
}

// filterFlags declares the filter flags of r and returns the function
// that builds its Filter from their parsed values.
func (f *FlagSet) filterFlags(r Registration) func() (Filter, error) {
	var none *regexp.Regexp // a flag the collector does not have
	devInclude, devExclude := &none, &none
	includeFlag := f.Flag("metrics-include", "Regexp of the collector's metric families to build, matched against the name without xdp_ and the collector's name (METRICS.md gives each; anchored); empty: all.").Default("").Regexp()
	exclude := f.Flag("metrics-exclude", "Regexp of the collector's metric families not to build (anchored, matched as metrics-include is), applied after metrics-include.").Default(r.MetricsExclude).Regexp()
	// A default exclude is a long regexp: the extra flag adds to it
	// without copying it.
	extra := &none
	if r.MetricsExclude != "" {
		extra = f.Flag("metrics-exclude-extra", "Regexp of further metric families not to build, in addition to metrics-exclude and its default (anchored, matched as metrics-include is).").Default("").Regexp()
	}
	if r.DeviceLabel {
		devInclude = f.Flag("device-include", "Regexp of devices to report (anchored, matched against the device label; empty: all).").Default("").Regexp()
		devExclude = f.Flag("device-exclude", "Regexp of devices not to report (anchored), applied after device-include.").Default(r.DeviceExclude).Regexp()
	}
	return func() (Filter, error) {
		fams, err := newFamilyFilter(r.Name, *includeFlag, *exclude, *extra)
		return Filter{Families: fams, Devices: newDeviceFilter(*devInclude, *devExclude)}, err
	}
}

// Selection is the outcome of flag parsing: which collectors are enabled and
// how to build each.
type Selection struct {
	procFS, sysFS   *string
	enabled         map[string]*bool
	given           map[string]*bool // --[no-]collector.NAME on the command line
	disableDefaults *bool
	builders        map[string]Builder
	flags           map[string]*FlagSet
}

// AddFlags declares --[no-]collector.NAME and every collector's own flags on app.
func AddFlags(app *kingpin.Application) *Selection {
	s := &Selection{enabled: map[string]*bool{}, given: map[string]*bool{}, builders: map[string]Builder{}, flags: map[string]*FlagSet{}}
	s.procFS = app.Flag("path.procfs", "procfs mount point every collector reads /proc from.").Default(defaultProcFS).String()
	s.sysFS = app.Flag("path.sysfs", "sysfs mount point every collector reads /sys from.").Default(defaultSysFS).String()
	s.disableDefaults = app.Flag("collector.disable-defaults",
		"Turn off every collector that is on by default; turn on the ones wanted with --collector.NAME (as node_exporter's flag).").
		Default("false").Bool()
	for _, r := range Registrations() {
		state := "disabled"
		if r.DefaultEnabled {
			state = "enabled"
		}
		s.given[r.Name] = new(bool)
		s.enabled[r.Name] = app.Flag("collector."+r.Name,
			fmt.Sprintf("%s (default: %s).", r.Help, state)).
			Default(fmt.Sprint(r.DefaultEnabled)).IsSetByUser(s.given[r.Name]).Bool()
		fs := &FlagSet{app: app, name: r.Name, set: map[string]*bool{}}
		fs.filter = fs.filterFlags(r)
		s.flags[r.Name] = fs
		if r.Flags != nil {
			s.builders[r.Name] = r.Flags(fs)
		}
	}
	return s
}

// Validate rejects a collector's own flag given while the collector is
// disabled (`--collector.rxq.device=eth0` without `--collector.rxq`): the
// flag would otherwise be ignored without a word. For an enabled one it
// checks its filter flags (a metrics-exclude that names no family).
func (s *Selection) Validate() error {
	for _, r := range Registrations() {
		if s.on(r.Name) {
			if _, err := s.flags[r.Name].filter(); err != nil {
				return err
			}
			continue
		}
		var given []string
		for name, set := range s.flags[r.Name].set {
			if *set {
				given = append(given, "--"+name)
			}
		}
		if len(given) > 0 {
			sort.Strings(given)
			return fmt.Errorf("%s given but collector %s is disabled; enable it with --collector.%s",
				strings.Join(given, ", "), r.Name, r.Name)
		}
	}
	return nil
}

// Enabled lists the collectors selected on the command line.
func (s *Selection) Enabled() []string {
	var out []string
	for _, r := range Registrations() {
		if s.on(r.Name) {
			out = append(out, r.Name)
		}
	}
	return out
}

// on reports whether collector name runs: as --[no-]collector.NAME says,
// or by its default unless --collector.disable-defaults.
func (s *Selection) on(name string) bool {
	if *s.disableDefaults && !*s.given[name] {
		return false
	}
	return *s.enabled[name]
}

// ScrapeCapabilities is the union of the ScrapeCapabilities of the enabled
// collectors.
func (s *Selection) ScrapeCapabilities() []int {
	seen := map[int]bool{}
	var out []int
	for _, name := range s.Enabled() {
		for _, c := range registrations[name].ScrapeCapabilities {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
			}
		}
	}
	sort.Ints(out)
	return out
}

// Build constructs every enabled collector. A collector whose constructor
// fails is logged once, here, and kept so that every scrape still reports
// it: one that this host cannot support (its error is
// errors.ErrUnsupported: a kernel built without the feature) at INFO,
// with xdp_scrape_collector_unsupported 1 and success 1; one that failed
// otherwise (a missing capability, a refused program) at ERROR, with
// success 0. Neither prevents the others from running.
func (s *Selection) Build(logger *slog.Logger) map[string]Collector {
	out := map[string]Collector{}
	for _, name := range s.Enabled() {
		b := s.builders[name]
		if b == nil {
			out[name] = Unavailable(fmt.Errorf("collector %s has no builder", name))
			continue
		}
		var c Collector
		shared, err := s.shared(name)
		if err == nil {
			c, err = b(logger.With("collector", name), shared)
		}
		switch {
		case err != nil && unsupportedOnly(err):
			logger.Info("collector not supported on this host; it reports xdp_scrape_collector_unsupported 1",
				"collector", name, "reason", err)
			c = Unavailable(err)
		case err != nil:
			logger.Error("collector unavailable; it will report success 0 on every scrape",
				"collector", name, "err", err)
			c = Unavailable(err)
		}
		out[name] = c
	}
	return out
}

// shared is what the parsed flags give collector name's builder.
func (s *Selection) shared(name string) (Shared, error) {
	filter, err := s.flags[name].filter()
	return Shared{Filter: filter, ProcFS: *s.procFS, SysFS: *s.sysFS}, err
}

// unsupportedOnly reports whether err says only that this host lacks
// something: every error joined in it (errors.Join, or several %w) is
// errors.ErrUnsupported, which readers wrap for what the kernel does not
// have. One part that is not makes err a failure.
func unsupportedOnly(err error) bool {
	if errors.Is(err, errors.ErrUnsupported) {
		if multi, ok := err.(interface{ Unwrap() []error }); ok {
			for _, part := range multi.Unwrap() {
				if !unsupportedOnly(part) {
					return false
				}
			}
			return true
		}
		if wrapped := errors.Unwrap(err); wrapped != nil && wrapped != errors.ErrUnsupported {
			return unsupportedOnly(wrapped)
		}
		return true
	}
	return false
}

// unavailable is a collector whose constructor failed: it reports that
// error on every Update.
type unavailable struct{ err error }

// Unavailable returns a collector that reports err on every Update.
func Unavailable(err error) Collector { return unavailable{err: err} }

func (u unavailable) Update(context.Context, *LinkSnapshot, chan<- prometheus.Metric) error {
	return u.err
}

func (unavailable) Close() error { return nil }
