// Package prebuilt is a prometheus.Metric whose label pairs were built
// once (prometheus.MakeLabelPairs) and are shared by every sample of the
// series: a collector that sends thousands of samples per scrape from a
// plan made once allocates one slice of these instead of label pairs per
// sample.
package prebuilt

import (
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Metric is one sample with prebuilt, read-only label pairs.
type Metric struct {
	desc  *prometheus.Desc
	typ   prometheus.ValueType
	value float64
	pairs []*dto.LabelPair
}

// New is a sample of desc; pairs are shared, never written.
func New(desc *prometheus.Desc, typ prometheus.ValueType, value float64, pairs []*dto.LabelPair) Metric {
	return Metric{desc: desc, typ: typ, value: value, pairs: pairs}
}

// Desc is the sample's descriptor.
func (m *Metric) Desc() *prometheus.Desc { return m.desc }

// Write writes the sample as its type says.
func (m *Metric) Write(out *dto.Metric) error {
	out.Label = m.pairs
	v := m.value
	switch m.typ {
	case prometheus.CounterValue:
		out.Counter = &dto.Counter{Value: &v}
	case prometheus.GaugeValue:
		out.Gauge = &dto.Gauge{Value: &v}
	default:
		out.Untyped = &dto.Untyped{Value: &v}
	}
	return nil
}
