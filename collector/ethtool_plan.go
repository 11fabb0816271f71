package collector

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/collector/internal/labelvalue"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/ethtoolname"
)

// state returns what the collector keeps for the device.
func (c *ethtoolCollector) state(index int) *ethtoolDev {
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.devices[index]
	if st == nil {
		st = &ethtoolDev{}
		c.devices[index] = st
	}
	return st
}

// entry returns the cached plan for the device, re-reading its string
// sets only when the key (driver, name, set sizes, channels) changed.
func (c *ethtoolCollector) entry(d ethtoolDevice, st *ethtoolDev, key ethtoolKey) (*ethtoolEntry, error) {
	if e := st.plan.Load(); e != nil && e.key == key {
		return e, nil
	}
	e := &ethtoolEntry{key: key}
	if key.nStats > 0 {
		names, err := c.src.StatNames(d.Name, key.nStats)
		if err != nil {
			return nil, err
		}
		e.samples, e.hasDrops = c.classify(d.Label, key.driver, names)
		for _, s := range e.samples {
			if s.sourcePairs != nil {
				e.sources++
			}
		}
		logStandard(c.logger, d.Label, key.driver, e)
	}
	if key.nPrivFlags > 0 {
		names, err := c.src.PrivFlagNames(d.Name)
		switch {
		case err == nil:
			seen := make(map[string]bool, len(names))
			for bit, n := range names {
				// A name listed twice would be a duplicate series,
				// which the registry rejects (regression input
				// dup-private-flag of FuzzEthtoolDump); the first
				// bit wins.
				if n = labelvalue.Escape(n); seen[n] {
					c.logger.Debug("private flag listed twice; reporting the first", "device", d.Label, "flag", n)
					continue
				}
				seen[n] = true
				e.privBits = append(e.privBits, bit)
				e.privPairs = append(e.privPairs, prometheus.MakeLabelPairs(ethtoolPrivFlag.Desc(), []string{d.Label, n}))
			}
		case skippable(err):
			c.logger.Debug("no private flag names", "device", d.Label, "err", err)
		default:
			return nil, fmt.Errorf("private flag names: %w", err)
		}
	}
	st.plan.Store(e)
	return e, nil
}

// ethtoolTarget is the series a stat becomes.
type ethtoolTarget struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	scale  float64
	labels []string
	sum    bool   // the stats of every queue add up to this series
	std    stdKey // a standard counter that takes its place where the device has it
	drop   bool   // a host-resource drop the driver names
	source *signalSource
}

// signalSource is the xdp_nic_signal_source_info series of a NIC signal
// series the driver's names give: the names summed into it.
type signalSource struct {
	fam              *Family
	direction, where string
	stats            []string
}

// pairs are the label pairs of the source series of device dev.
func (s *signalSource) pairs(dev string) (*prometheus.Desc, []*dto.LabelPair) {
	desc, values := nicSignalSource.descFor([]string{dev, s.fam.Name, s.direction, s.where, srcEthtool, strings.Join(s.stats, ",")})
	return desc, prometheus.MakeLabelPairs(desc, labelvalue.EscapeAll(values))
}

// classify decides, once per string set, which series each stat becomes:
// a NIC signal the driver's table names (nic.go), a curated family, an
// untyped family (if metrics-include selects it), or nothing. Two stats
// that land on the same series of a family that does not sum them keep
// the one whose driver name sorts first, so the choice does not depend on
// driver order, and the loser is logged at debug level (once: this runs
// only when the string set changes). hasDrops says whether the driver
// names a host-resource drop among these stats.
func (c *ethtoolCollector) classify(dev, driver string, names []string) (samples []ethtoolSample, hasDrops bool) {
	stats, hasPerQueue := ethtoolname.ParseAll(names)
	idx := driverIndexes[driver]
	type cand struct {
		t       ethtoolTarget
		indexes []int
	}
	series := map[string]*cand{}
	var order []string
	for i, st := range stats {
		if st.Name == "" {
			continue
		}
		t, ok := c.target(dev, idx, st, hasPerQueue)
		if !ok {
			continue
		}
		hasDrops = hasDrops || t.drop
		key := t.desc.String() + "\xff" + strings.Join(t.labels, "\xff")
		if s, dup := series[key]; dup {
			s.indexes = append(s.indexes, i)
			if src := s.t.source; src != nil && !slices.Contains(src.stats, t.source.stats[0]) {
				src.stats = append(src.stats, t.source.stats[0])
			}
			continue
		}
		series[key] = &cand{t: t, indexes: []int{i}}
		order = append(order, key)
	}
	out := make([]ethtoolSample, 0, len(order))
	for _, k := range order {
		s := series[k]
		out = append(out, c.sample(dev, names, s.t, s.indexes))
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].idx < out[j].idx })
	return out, hasDrops
}

// target is the series of one stat, or false when it is not exported.
func (c *ethtoolCollector) target(dev string, idx *driverIndex, st ethtoolname.Stat, hasPerQueue map[string]bool) (ethtoolTarget, bool) {
	if ds, ok := idx.lookup(st); ok {
		t, fam := signalTarget(dev, ds)
		return t, c.fams.keeps(fam)
	}
	if _, ok := perQueueCurated[st.Base]; ok && !st.PerQueue && hasPerQueue[st.Base] {
		// The device total of the queues the family carries (mlx5's
		// rx_cache_reuse beside rx<N>_cache_reuse, i40e's rx_packets
		// beside rx-<N>.packets): the family's sum(), never a second one.
		return ethtoolTarget{}, false
	}
	if cs, ok := perQueueCurated[st.Base]; ok {
		queue, sum := st.Queue, st.PerQueue && c.sum != nil && c.sum.MatchString(cs.fam.ShortName())
		if sum {
			queue = ""
		}
		t := familyTarget(cs.fam, cs.scale, labelsFor(dev, queue, cs.extra, true))
		t.sum = sum
		return t, c.fams.keeps(cs.fam)
	}
	if cs, ok := deviceCurated[st.Name]; ok {
		return familyTarget(cs.fam, cs.scale, labelsFor(dev, "", cs.extra, false)), c.fams.keeps(cs.fam)
	}
	if size, ok := ethtoolname.PhyRxSize(st.Name); ok {
		return ethtoolTarget{desc: ethtoolPhyRxSize.Desc(), typ: prometheus.CounterValue, scale: 1, labels: []string{dev, size}}, c.fams.keeps(ethtoolPhyRxSize)
	}
	name := ethtoolname.Sanitize(st.Base)
	if name == "" {
		c.logger.Debug("ethtool stat has no usable characters; not exported", "device", dev, "stat", st.Name)
		return ethtoolTarget{}, false
	}
	fam, labels := ethtoolStat, []string{dev}
	if st.PerQueue {
		fam, labels = ethtoolQueueStat, append(labels, st.Queue)
	}
	if !c.fams.keepsMember(fam, name) {
		return ethtoolTarget{}, false
	}
	return ethtoolTarget{desc: c.untypedDesc(fam, name), typ: prometheus.UntypedValue, scale: 1, labels: labels}, true
}

// sample is the series t of the stats at indexes: their sum, or where
// they collide, the one whose name sorts first.
func (c *ethtoolCollector) sample(dev string, names []string, t ethtoolTarget, indexes []int) ethtoolSample {
	pairs := prometheus.MakeLabelPairs(t.desc, t.labels)
	if t.sum {
		s := ethtoolSample{idx: indexes[0], summed: indexes[1:], desc: t.desc, typ: t.typ, scale: t.scale, pairs: pairs, std: t.std}
		if t.source != nil && c.fams.keeps(nicSignalSource) {
			sort.Strings(t.source.stats)
			s.sourceDesc, s.sourcePairs = t.source.pairs(dev)
		}
		return s
	}
	keep := indexes[0]
	for _, i := range indexes[1:] {
		if names[i] < names[keep] {
			keep = i
		}
	}
	for _, i := range indexes {
		if i != keep {
			c.logger.Debug("ethtool stats collide after parsing and sanitising; keeping one",
				"device", dev, "kept", names[keep], "dropped", names[i])
		}
	}
	return ethtoolSample{idx: keep, desc: t.desc, typ: t.typ, scale: t.scale, pairs: pairs}
}

// familyTarget is the series of fam with labels, scaled by scale; an
// empty label (the queue of a family summed over queues) is left out.
func familyTarget(fam *Family, scale float64, labels []string) ethtoolTarget {
	desc, values := fam.descFor(labels)
	return ethtoolTarget{desc: desc, typ: fam.valueType(), scale: scale, labels: values}
}

func labelsFor(dev, queue, extra string, withQueue bool) []string {
	l := []string{dev}
	if withQueue {
		l = append(l, queue)
	}
	if extra != "" {
		l = append(l, extra)
	}
	return l
}

// untypedDesc returns the shared descriptor of the member stat of fam
// (ethtoolStat or ethtoolQueueStat). Its HELP depends only on the name,
// so two drivers feeding one family agree.
func (c *ethtoolCollector) untypedDesc(fam *Family, stat string) *prometheus.Desc {
	c.mu.Lock()
	defer c.mu.Unlock()
	key := fam.Name + stat
	if d, ok := c.descs[key]; ok {
		return d
	}
	// Untyped: drivers do not say whether a stat is a counter or a gauge.
	help := fmt.Sprintf("The driver's ethtool -S stat %q, untyped.", stat)
	if fam == ethtoolQueueStat {
		help = fmt.Sprintf("The driver's per-queue ethtool -S stat %q, untyped.", stat)
	}
	d := fam.RunTimeDesc(stat, help)
	c.descs[key] = d
	return d
}
