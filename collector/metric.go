package collector

import (
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

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

// Stability is what a family promises its readers (docs/dev/metrics-design.md).
type Stability string

// The stability levels, as the Kubernetes metrics stability framework
// names its own: a stable family is renamed or removed only through a
// deprecation cycle in CHANGELOG.md; an experimental one may change in any
// release, and its HELP says so.
const (
	Stable       Stability = "stable"
	Experimental Stability = "experimental"
)

// experimentalHelp starts the HELP of an experimental family.
const experimentalHelp = "Experimental: "

// Family is one documented metric family. Every family the exporter
// emits is declared through newFamily, which makes the catalogue the single
// source for both the descriptors and METRICS.md.
type Family struct {
	Name string
	// Help is the family's HELP: one sentence saying what is counted, in
	// which unit, from which kernel source.
	Help string
	// Doc is METRICS.md's explanation where Help's sentence is not all a
	// reader needs; empty where it is.
	Doc       string
	Stability Stability
	Type      Type
	Labels    []string
	Collector string
	// desc is nil for a family named at run time (RunTime).
	desc *prometheus.Desc
	// partial holds the descriptors of series that leave labels out, by
	// the bit mask of the labels they keep (descFor).
	partial sync.Map
}

var catalogue []*Family

// runTimeName is the part of a family name that a collector fills in at
// run time: xdp_nic_stat_<stat> is every driver stat without a
// curated family, its name from the driver's string set.
const runTimeName = "<stat>"

// newFamily declares the family xdp_NAME of collector (empty for the
// scrape's own families). A name ending in <stat> declares a family
// named at run time: its samples are built with RunTimeDesc.
func newFamily(collector, name, help string, typ Type, labels ...string) *Family {
	f := &Family{
		Name:      Namespace + "_" + name,
		Help:      help,
		Stability: Stable,
		Type:      typ,
		Labels:    labels,
		Collector: collector,
	}
	f.describe()
	catalogue = append(catalogue, f)
	return f
}

// documented gives the family METRICS.md's explanation beside its HELP.
func (f *Family) documented(doc string) *Family {
	f.Doc = doc
	return f
}

// experimental marks the family experimental, which its HELP then says.
func (f *Family) experimental() *Family {
	f.Stability = Experimental
	f.describe()
	return f
}

// ExposedHelp is the HELP the family is exposed with.
func (f *Family) ExposedHelp() string {
	if f.Stability == Experimental {
		return experimentalHelp + f.Help
	}
	return f.Help
}

// describe builds the family's descriptor; one named at run time has
// its members' descriptors built by RunTimeDesc.
func (f *Family) describe() {
	if !f.RunTime() {
		f.desc = prometheus.NewDesc(f.Name, f.ExposedHelp(), f.Labels, nil)
	}
}

// RunTime reports whether the family's names are completed at run time.
func (f *Family) RunTime() bool { return strings.HasSuffix(f.Name, runTimeName) }

// RunTimeDesc is the descriptor of one member of a run-time family: the
// family's name with stat in place of <stat>, help its HELP.
func (f *Family) RunTimeDesc(stat, help string) *prometheus.Desc {
	return prometheus.NewDesc(strings.TrimSuffix(f.Name, runTimeName)+stat, help, f.Labels, nil)
}

// Desc returns the family's descriptor.
func (f *Family) Desc() *prometheus.Desc { return f.desc }

// Must builds one sample of a counter, gauge or untyped family.
func (f *Family) Must(value float64, labelValues ...string) prometheus.Metric {
	desc, values := f.descFor(labelValues)
	return prometheus.MustNewConstMetric(desc, f.valueType(), value, labelvalue.EscapeAll(values)...)
}

// MustCreated is Must with the time the series was created, for a counter.
func (f *Family) MustCreated(value float64, created time.Time, labelValues ...string) prometheus.Metric {
	desc, values := f.descFor(labelValues)
	return prometheus.MustNewConstMetricWithCreatedTimestamp(desc, f.valueType(), value, created, labelvalue.EscapeAll(values)...)
}

// descFor is the descriptor and label values of one series of the family.
// A label whose value is empty (a queue without a NAPI instance, a
// program attached without a link, a drop the kernel gives no device)
// is left out of the series: Prometheus stores an empty label as no
// label, so the exposition says what the stored series will be, and a
// selector {napi_id=""} matches it as before. METRICS.md's label table
// says where a label can be absent.
func (f *Family) descFor(values []string) (*prometheus.Desc, []string) {
	var keep uint64
	empty := false
	for i, v := range values {
		if v == "" {
			empty = true
		} else {
			keep |= 1 << i
		}
	}
	if !empty || len(values) != len(f.Labels) {
		return f.desc, values
	}
	kept := make([]string, 0, len(values))
	for _, v := range values {
		if v != "" {
			kept = append(kept, v)
		}
	}
	if d, ok := f.partial.Load(keep); ok {
		return d.(*prometheus.Desc), kept
	}
	names := make([]string, 0, len(kept))
	for i, l := range f.Labels {
		if keep&(1<<i) != 0 {
			names = append(names, l)
		}
	}
	d, _ := f.partial.LoadOrStore(keep, prometheus.NewDesc(f.Name, f.ExposedHelp(), names, nil))
	return d.(*prometheus.Desc), kept
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
// is page_pool_inflight_pages, xdp_cpu_softnet_dropped_total of the cpu
// collector stays softnet_dropped_total), as node_exporter's ethtool
// collector matches names without node_ethtool_.
func (f *Family) ShortName() string {
	s := strings.TrimPrefix(f.Name, Namespace+"_")
	return strings.TrimPrefix(s, f.Collector+"_")
}

// Catalogue returns every declared family sorted by name.
func Catalogue() []*Family {
	out := append([]*Family(nil), catalogue...)
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}
