// Package top turns two scrapes of an exporter into the per-second views of
// the terminal tools it replaces (xdp_rxq_info, xdp_monitor, napi_monitor,
// ethtool_stats.pl, mpstat with perf stat). cmd/xdp-top draws them.
package top

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// Scrape is one exposition of one endpoint.
type Scrape struct {
	At       time.Time
	Families map[string]*dto.MetricFamily
}

// Endpoint is an exporter's /metrics URL and the client that reaches it.
type Endpoint struct {
	Name   string // the label shown beside its views
	URL    string
	Client *http.Client
}

// accept asks for the delimited protobuf exposition, which promhttp serves
// and which decodes about ten times faster than text, and takes text from
// an exporter that only speaks that.
const accept = `application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited;q=0.7,text/plain;version=0.0.4;q=0.3`

// Fetch scrapes the endpoint once. Any answer that is not a 200 with an
// exposition prometheus/common decodes is an error that says what came
// back.
func (e Endpoint) Fetch(ctx context.Context) (*Scrape, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", accept)
	// The scrape's time is when it started, as Prometheus stamps its
	// samples: the exporter reads its counters right after the request
	// arrives, while the time to the response varies with the body.
	at := time.Now()
	resp, err := e.Client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 200))
		return nil, fmt.Errorf("HTTP %d: %s", resp.StatusCode, strings.TrimSpace(string(body)))
	}
	format := expfmt.ResponseFormat(resp.Header)
	dec := expfmt.NewDecoder(resp.Body, format)
	mfs := map[string]*dto.MetricFamily{}
	for {
		mf := &dto.MetricFamily{}
		err := dec.Decode(mf)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("not a Prometheus exposition (%s): %w", resp.Header.Get("Content-Type"), err)
		}
		mfs[mf.GetName()] = mf
	}
	return &Scrape{At: at, Families: mfs}, nil
}

// Series is one sample's labels and value.
type Series struct {
	Labels map[string]string
	Value  float64
}

// Get returns the label's value, "" when absent.
func (s Series) Get(name string) string { return s.Labels[name] }

func labelsOf(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// key identifies a series within its family by its label pairs, in the
// order the exposition lists them: one exporter lists them the same way in
// every scrape (client_golang sorts them by name).
func key(m *dto.Metric) string {
	var b strings.Builder
	for _, l := range m.GetLabel() {
		b.WriteString(l.GetName())
		b.WriteByte(0)
		b.WriteString(l.GetValue())
		b.WriteByte(0)
	}
	return b.String()
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.GetCounter().GetValue()
	case m.Gauge != nil:
		return m.GetGauge().GetValue()
	default:
		return m.GetUntyped().GetValue()
	}
}

// Has reports whether the scrape carries the family.
func (s *Scrape) Has(family string) bool {
	mf, ok := s.Families[family]
	return ok && len(mf.GetMetric()) > 0
}

// Values returns a counter, gauge or untyped family's samples.
func (s *Scrape) Values(family string) []Series {
	mf := s.Families[family]
	out := make([]Series, 0, len(mf.GetMetric()))
	for _, m := range mf.GetMetric() {
		out = append(out, Series{Labels: labelsOf(m), Value: value(m)})
	}
	return out
}

// increase is what Prometheus' rate() sees between two samples of a
// counter: the difference, or, when the value went down (the exporter or
// the counter restarted), the new value, counted from zero.
func increase(prev, cur float64) float64 {
	if cur < prev {
		return cur
	}
	return cur - prev
}

// Rates returns the per-second rate of every series of a counter family
// present in both scrapes. A series new in cur has no rate yet, as in
// Prometheus.
func Rates(prev, cur *Scrape, family string) []Series {
	var out []Series
	each(prev, cur, family, func(m *dto.Metric, rate float64) {
		out = append(out, Series{Labels: labelsOf(m), Value: rate})
	})
	return out
}

// each calls fn with the rate of every series of a counter family present
// in both scrapes. Series are matched by position first (one exporter
// writes a family's series in the same order on every scrape), by labels
// where that fails.
func each(prev, cur *Scrape, family string, fn func(m *dto.Metric, rate float64)) {
	if prev == nil || cur == nil {
		return
	}
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		return
	}
	pm := prev.Families[family].GetMetric()
	var before map[string]float64
	for i, m := range cur.Families[family].GetMetric() {
		if i < len(pm) && sameLabels(pm[i], m) {
			fn(m, increase(value(pm[i]), value(m))/dt)
			continue
		}
		if before == nil {
			before = make(map[string]float64, len(pm))
			for _, p := range pm {
				before[key(p)] = value(p)
			}
		}
		if p, ok := before[key(m)]; ok {
			fn(m, increase(p, value(m))/dt)
		}
	}
}

func sameLabels(a, b *dto.Metric) bool {
	la, lb := a.GetLabel(), b.GetLabel()
	if len(la) != len(lb) {
		return false
	}
	for i := range la {
		if la[i].GetName() != lb[i].GetName() || la[i].GetValue() != lb[i].GetValue() {
			return false
		}
	}
	return true
}

// label returns the value of one label of m, "" when absent.
func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// Histogram is the per-second change of one histogram series: polls per
// second in each bucket (not cumulative), and the rates of _count and _sum.
type Histogram struct {
	Labels  map[string]string
	Uppers  []float64 // bucket upper bounds, +Inf last
	PerSec  []float64 // observations per second with a value in (previous upper, upper]
	Count   float64
	SumRate float64
}

// HistogramRates returns the per-second change of every series of a
// histogram family present in both scrapes.
func HistogramRates(prev, cur *Scrape, family string) []Histogram {
	if prev == nil || cur == nil {
		return nil
	}
	dt := cur.At.Sub(prev.At).Seconds()
	if dt <= 0 {
		return nil
	}
	before := map[string]*dto.Histogram{}
	for _, m := range prev.Families[family].GetMetric() {
		before[key(m)] = m.GetHistogram()
	}
	var out []Histogram
	for _, m := range cur.Families[family].GetMetric() {
		p, ok := before[key(m)]
		h := m.GetHistogram()
		if !ok || len(p.GetBucket()) != len(h.GetBucket()) {
			continue
		}
		r := Histogram{Labels: labelsOf(m),
			Count:   increase(float64(p.GetSampleCount()), float64(h.GetSampleCount())) / dt,
			SumRate: increase(p.GetSampleSum(), h.GetSampleSum()) / dt}
		reset := h.GetSampleCount() < p.GetSampleCount()
		var below float64
		for i, b := range h.GetBucket() {
			cum := float64(b.GetCumulativeCount())
			if !reset {
				cum -= float64(p.GetBucket()[i].GetCumulativeCount())
			}
			r.Uppers = append(r.Uppers, b.GetUpperBound())
			r.PerSec = append(r.PerSec, (cum-below)/dt)
			below = cum
		}
		total := r.Count * dt
		r.Uppers = append(r.Uppers, posInf)
		r.PerSec = append(r.PerSec, (total-below)/dt)
		out = append(out, r)
	}
	return out
}
