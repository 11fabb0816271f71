package uncore

import (
	"cmp"
	"errors"
	"slices"
	"strconv"
)

type ddioKey struct {
	socket          int
	request, result string
}

type timeKey struct {
	socket     int
	pmu, group string
}

// accumulator sums one read's counts per socket over the boxes.
type accumulator struct {
	r     Reading
	ddio  map[ddioKey]float64
	times map[timeKey]*Time
}

// Read reads every open group. A group that fails to read is reported in
// the error; the others are still in the reading.
func (h *Host) Read() (Reading, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a := accumulator{r: Reading{Available: h.available}, ddio: map[ddioKey]float64{}, times: map[timeKey]*Time{}}
	var errs []error
	for _, c := range h.counters {
		r, vals, err := c.group.ReadScaled(&c.scaler)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		c.emit(&a, vals)
		if c.pmu == "" {
			continue
		}
		k := timeKey{c.socket, c.pmu, c.name}
		t := a.times[k]
		if t == nil {
			t = &Time{Socket: c.socket, PMU: c.pmu, Group: c.name}
			a.times[k] = t
		}
		t.Enabled += float64(r.Enabled) * 1e-9
		t.Running += float64(r.Running) * 1e-9
	}
	for k, v := range a.ddio {
		a.r.DDIO = append(a.r.DDIO, DDIOCount{Socket: k.socket, Request: k.request, Result: k.result, Requests: v})
	}
	slices.SortFunc(a.r.DDIO, func(x, y DDIOCount) int {
		return cmp.Or(x.Socket-y.Socket, cmp.Compare(x.Request, y.Request), cmp.Compare(x.Result, y.Result))
	})
	for _, t := range a.times {
		a.r.Times = append(a.r.Times, *t)
	}
	slices.SortFunc(a.r.Times, func(x, y Time) int {
		return cmp.Or(x.Socket-y.Socket, cmp.Compare(x.PMU, y.PMU), cmp.Compare(x.Group, y.Group))
	})
	return a.r, errors.Join(errs...)
}

// The kinds of Sample, one per exported family.
const (
	SampleDDIO        = "ddio"         // socket, request, result
	SampleIIO         = "iio"          // socket, iio, root_bus, transaction, op
	SampleFreeRunning = "free_running" // socket, iio, root_bus, port, flow
	SampleEnabled     = "enabled"      // socket, pmu, group
	SampleRunning     = "running"      // socket, pmu, group
	SampleAvailable   = "available"    // event
)

// Sample is one value of a Reading with its label values, in the order
// its kind's constant lists them.
type Sample struct {
	Kind   string
	Value  float64
	Labels []string
}

// Samples flattens the reading into samples.
func (r Reading) Samples() []Sample {
	var out []Sample
	add := func(kind string, v float64, labels ...string) { out = append(out, Sample{kind, v, labels}) }
	itoa := strconv.Itoa
	for _, d := range r.DDIO {
		add(SampleDDIO, d.Requests, itoa(d.Socket), d.Request, d.Result)
	}
	for _, x := range r.IIO {
		add(SampleIIO, x.Bytes, itoa(x.Socket), itoa(x.IIO), x.RootBus, x.Direction, x.Op)
	}
	for _, x := range r.FreeRunning {
		add(SampleFreeRunning, x.Bytes, itoa(x.Socket), itoa(x.IIO), x.RootBus, x.Port, x.Direction)
	}
	for _, t := range r.Times {
		add(SampleEnabled, t.Enabled, itoa(t.Socket), t.PMU, t.Group)
		add(SampleRunning, t.Running, itoa(t.Socket), t.PMU, t.Group)
	}
	for ev, ok := range r.Available {
		add(SampleAvailable, map[bool]float64{true: 1}[ok], ev)
	}
	return out
}

// Close closes every counter; it is safe to call twice.
func (h *Host) Close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	var errs []error
	for _, c := range h.counters {
		errs = append(errs, c.group.Close())
	}
	h.counters = nil
	return errors.Join(errs...)
}
