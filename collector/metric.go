package collector

import (
	"fmt"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/created"
	"github.com/xdp-exporter/xdp_exporter/collector/internal/labelvalue"
)

// Type is the Prometheus type of a family as documented in METRICS.md.
type Type string

// The family types used by the exporter.
const (
	Counter   Type = "counter"
	Gauge     Type = "gauge"
	Untyped   Type = "untyped"
	Histogram Type = "histogram"
)

// Family is one documented metric family. Every fixed family the exporter
// emits is declared through newFamily, which makes the catalogue the single
// source for both the descriptors and METRICS.md.
type Family struct {
	Name      string
	Help      string
	Type      Type
	Labels    []string
	Collector string
	desc      *prometheus.Desc
}

var catalogue []*Family

// newFamily declares the family NAMESPACE_[subsystem_]name. collector names
// the owning collector in METRICS.md; the subsystem usually equals it.
func newFamily(subsystem, name, help string, typ Type, labels ...string) *Family {
	return newCollectorFamily(subsystem, subsystem, name, help, typ, labels...)
}

// newCollectorFamily is newFamily for a family whose subsystem differs from
// the collector that emits it.
func newCollectorFamily(collector, subsystem, name, help string, typ Type, labels ...string) *Family {
	f := &Family{
		Name:      prometheus.BuildFQName(Namespace, subsystem, name),
		Help:      help,
		Type:      typ,
		Labels:    labels,
		Collector: collector,
	}
	f.desc = prometheus.NewDesc(f.Name, help, labels, nil)
	catalogue = append(catalogue, f)
	return f
}

// Desc returns the family's descriptor.
func (f *Family) Desc() *prometheus.Desc { return f.desc }

// Must builds one sample of a counter, gauge or untyped family.
func (f *Family) Must(value float64, labelValues ...string) prometheus.Metric {
	return prometheus.MustNewConstMetric(f.desc, f.valueType(), value, labelvalue.EscapeAll(labelValues)...)
}

// MustCreated is Must with the time the series was created, for a counter.
func (f *Family) MustCreated(value float64, created time.Time, labelValues ...string) prometheus.Metric {
	return prometheus.MustNewConstMetricWithCreatedTimestamp(f.desc, f.valueType(), value, created, labelvalue.EscapeAll(labelValues)...)
}

// valueType is the client library's value type of a counter, gauge or
// untyped family.
func (f *Family) valueType() prometheus.ValueType {
	switch f.Type {
	case Counter:
		return prometheus.CounterValue
	case Gauge:
		return prometheus.GaugeValue
	case Untyped:
		return prometheus.UntypedValue
	}
	panic("collector: a sample of the " + string(f.Type) + " family " + f.Name)
}

// ShortName is the name --collector.NAME.metrics-include and
// -exclude match: the family's name without the namespace and, where it
// starts with one, its collector's prefix (xdp_netdev_page_pool_inflight_pages
// is page_pool_inflight_pages, xdp_softnet_dropped_total of the cpu
// collector stays softnet_dropped_total), as node_exporter's ethtool
// collector matches names without node_ethtool_.
func (f *Family) ShortName() string {
	s := strings.TrimPrefix(f.Name, Namespace+"_")
	return strings.TrimPrefix(s, f.Collector+"_")
}

// familyFilter is the family policy of --collector.NAME.metrics-include
// and -exclude, decided once per family when the collector is built: a
// scrape asks a map, not a regexp, and builds no sample of a family it
// drops. The zero value keeps every family.
type familyFilter struct {
	off     map[*Family]bool
	exclude *regexp.Regexp // for names built at run time
}

// newFamilyFilter selects the families of collector whose ShortName the
// anchored include matches (nil: all) and exclude does not. A non-empty
// regexp that matches none of the collector's families is an error: it is
// a typo that would otherwise filter nothing, or everything, in silence
// (unless the collector builds family names at run time).
func newFamilyFilter(collector string, include, exclude *regexp.Regexp) (familyFilter, error) {
	in, out := anchor(include), anchor(exclude)
	var names []string
	inHit, outHit, patterns := false, false, false
	f := familyFilter{off: map[*Family]bool{}, exclude: out}
	for _, fam := range Catalogue() {
		if fam.Collector != collector {
			continue
		}
		if fam.desc == nil {
			patterns = true
			continue
		}
		short := fam.ShortName()
		names = append(names, short)
		kept := in == nil || in.MatchString(short)
		dropped := out != nil && out.MatchString(short)
		inHit, outHit = inHit || kept, outHit || dropped
		if !kept || dropped {
			f.off[fam] = true
		}
	}
	if patterns {
		// Names built at run time (ethtool's untyped stats) may match
		// what no declared family does.
		return f, nil
	}
	for _, c := range []struct {
		flag string
		re   *regexp.Regexp
		hit  bool
	}{{"metrics-include", in, inHit}, {"metrics-exclude", out, outHit}} {
		if c.re != nil && !c.hit {
			return familyFilter{}, fmt.Errorf("--collector.%s.%s matches none of the collector's families (%s)",
				collector, c.flag, strings.Join(names, ", "))
		}
	}
	return f, nil
}

// excludesName reports whether metrics-exclude names a family built at run
// time, by its ShortName.
func (f familyFilter) excludesName(short string) bool {
	return f.exclude != nil && f.exclude.MatchString(short)
}

// keeps reports whether fam's samples are built.
func (f familyFilter) keeps(fam *Family) bool { return !f.off[fam] }

// send builds and sends one sample of fam unless the filter drops the
// family.
func (f familyFilter) send(ch chan<- prometheus.Metric, fam *Family, value float64, labelValues ...string) {
	if !f.off[fam] {
		ch <- fam.Must(value, labelValues...)
	}
}

// sendCreated is send for a counter whose series are created at run time
// (a program, a queue x CPU cell, a drop reason, an errno): the sample
// carries the time seen first saw the series.
func (f familyFilter) sendCreated(ch chan<- prometheus.Metric, fam *Family, seen *created.Tracker, value float64, labelValues ...string) {
	if !f.off[fam] {
		ch <- fam.MustCreated(value, seen.Time(fam.Name+"\xff"+strings.Join(labelValues, "\xff")), labelValues...)
	}
}

// Catalogue returns every declared family sorted by name.
func Catalogue() []*Family {
	out := append([]*Family(nil), catalogue...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// PatternFamily documents a family whose name is built at run time (the
// untyped ethtool stats): Name holds a pattern such as xdp_ethtool_<stat>.
func PatternFamily(collector, pattern, help string, typ Type, labels ...string) *Family {
	f := &Family{Name: pattern, Help: help, Type: typ, Labels: labels, Collector: collector}
	catalogue = append(catalogue, f)
	return f
}
