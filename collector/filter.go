package collector

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/collector/internal/created"
)

// Filter is what a collector's --collector.NAME.metrics-include/-exclude
// and device-include/-exclude select. The zero value selects everything.
type Filter struct {
	Families familyFilter
	Devices  deviceFilter
}

// familyFilter is the family policy of --collector.NAME.metrics-include
// and -exclude, decided once per family when the collector is built: a
// scrape asks a map, not a regexp, and builds no sample of a family it
// drops. A member of a run-time family is decided by the same regexps
// when the collector first names it (keepsMember). The zero value keeps
// every family.
type familyFilter struct {
	off              map[*Family]bool
	include, exclude *regexp.Regexp
}

// newFamilyFilter selects the families of collector whose ShortName the
// anchored include matches (nil: all) and neither exclude nor extra does.
// A non-empty regexp that matches none of the collector's families is an
// error: it is a typo that would otherwise filter nothing, or everything,
// in silence (unless the collector names families at run time, which it
// may match).
func newFamilyFilter(collector string, include, exclude, extra *regexp.Regexp) (familyFilter, error) {
	f := familyFilter{off: map[*Family]bool{}, include: anchor(include), exclude: anchor(either(exclude, extra))}
	exclude, extra = anchor(exclude), anchor(extra)
	var names []string
	inHit, outHit, extraHit, runTime := false, false, false, false
	for _, fam := range Catalogue() {
		if fam.Collector != collector {
			continue
		}
		if fam.RunTime() {
			runTime = true
			continue
		}
		short := fam.ShortName()
		names = append(names, short)
		kept := f.keepsName(short)
		inHit = inHit || f.include == nil || f.include.MatchString(short)
		outHit = outHit || exclude != nil && exclude.MatchString(short)
		extraHit = extraHit || extra != nil && extra.MatchString(short)
		if !kept {
			f.off[fam] = true
		}
	}
	if runTime {
		return f, nil
	}
	for _, c := range []struct {
		flag string
		re   *regexp.Regexp
		hit  bool
	}{{"metrics-include", f.include, inHit}, {"metrics-exclude", exclude, outHit}, {"metrics-exclude-extra", extra, extraHit}} {
		if c.re != nil && !c.hit {
			return familyFilter{}, fmt.Errorf("--collector.%s.%s matches none of the collector's families (%s)",
				collector, c.flag, strings.Join(names, ", "))
		}
	}
	return f, nil
}

// keepsName applies the regexps to a family's ShortName.
func (f familyFilter) keepsName(short string) bool {
	return (f.include == nil || f.include.MatchString(short)) && (f.exclude == nil || !f.exclude.MatchString(short))
}

// keeps reports whether fam's samples are built.
func (f familyFilter) keeps(fam *Family) bool { return !f.off[fam] }

// keepsMember reports whether the member stat of the run-time family fam
// is built: its ShortName, <stat> replaced by stat, selected as any
// family's.
func (f familyFilter) keepsMember(fam *Family, stat string) bool {
	return f.keepsName(strings.TrimSuffix(fam.ShortName(), runTimeName) + stat)
}

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

// deviceFilter is the device filter policy of every collector that has
// --collector.NAME.device-include/-exclude: both are regexps matched
// against the whole device label ("eth0" does not select "veth0"), include
// first (empty: every device), then exclude.
type deviceFilter struct{ include, exclude *regexp.Regexp }

func newDeviceFilter(include, exclude *regexp.Regexp) deviceFilter {
	return deviceFilter{include: anchor(include), exclude: anchor(exclude)}
}

// either is the regexp matching what a or b matches; nil or empty ones
// are left out.
func either(a, b *regexp.Regexp) *regexp.Regexp {
	var alts []string
	for _, re := range []*regexp.Regexp{a, b} {
		if re != nil && re.String() != "" {
			alts = append(alts, "(?:"+re.String()+")")
		}
	}
	if len(alts) == 0 {
		return nil
	}
	return regexp.MustCompile(strings.Join(alts, "|"))
}

// anchor makes a user's regexp match whole names. An empty regexp stays
// nil (no filter).
func anchor(re *regexp.Regexp) *regexp.Regexp {
	if re == nil || re.String() == "" {
		return nil
	}
	return regexp.MustCompile("^(?:" + re.String() + ")$")
}

// selects reports whether the filter keeps label. Series of no device
// (label "": an orphaned page pool, an unbound AF_XDP socket, a dropped
// skb without one) are kept unless device-include names the devices
// wanted.
func (f deviceFilter) selects(label string) bool {
	if label == "" {
		return f.include == nil
	}
	if f.include != nil && !f.include.MatchString(label) {
		return false
	}
	return f.exclude == nil || !f.exclude.MatchString(label)
}
