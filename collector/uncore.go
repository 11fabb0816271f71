package collector

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/uncore"
)

var (
	uncoreDDIO  = newFamily("uncore", "uncore_ddio_requests_total", "Device requests to memory in the socket's CHA TOR that hit or missed the LLC, from uncore perf events.", Counter, "socket", "request", "result").documented("Device requests to memory inserted in the socket's CHA TOR (ItoM and ItoMCacheNear: full-line writes; PCIRdCur: reads) that hit or missed the LLC, summed over the CHA boxes, scaled for multiplexing. The ItoM miss share is the DDIO miss ratio.").experimental()
	uncoreIIO   = newFamily("uncore", "uncore_iio_bytes_total", "Bytes of an IIO stack by transaction and op, from the IIO DATA_REQ uncore events, scaled for multiplexing.", Counter, "socket", "iio", "root_bus", "transaction", "op").documented("Bytes of an IIO stack (a PCIe root complex) by transaction (inbound: device reads and writes of memory; outbound: CPU MMIO reads and writes of devices) and op, perf iostat's figures from the IIO DATA_REQ events, scaled for multiplexing.").experimental()
	uncoreFree  = newFamily("uncore", "uncore_iio_free_running_bytes_total", "Bytes the IIO stack's port sent to or received from the CPU, from the free-running bandwidth counters.", Counter, "socket", "iio", "root_bus", "port", "flow").documented("Bytes the IIO stack's port sent to the CPU (flow in) or received from it (out), from the kernel's free-running bandwidth counters (bw_in_portN, bw_out_portN) and their scale.").experimental()
	uncoreOn    = newFamily("uncore", "uncore_enabled_seconds_total", "Time the socket's uncore event groups of the kind were enabled, summed over the boxes.", Counter, "socket", "pmu", "group").experimental()
	uncoreRun   = newFamily("uncore", "uncore_running_seconds_total", "Time the socket's uncore event groups counted, summed over the boxes.", Counter, "socket", "pmu", "group").documented("Time the socket's uncore event groups counted, summed over the boxes; below enabled, the kernel multiplexed them and the counts are scaled.").experimental()
	uncoreDev   = newFamily("uncore", "uncore_iio_device_info", "The IIO stack whose root bus is the network device's, from the die<N> mappings; always 1.", Gauge, "device", "socket", "iio", "root_bus").documented("The IIO stack a network device's PCI function is behind: the stack whose root bus (die<N> mapping) is the device's.").experimental()
	uncoreAvail = newFamily("uncore", "uncore_event_available", "1 if the uncore event was opened on every box, 0 if a box refused it.", Gauge, "event").documented("1 if the uncore event (perf's JSON name; iio_free_running for the bandwidth counters) was opened on every box, 0 if a box refused it: its family is missing.").experimental()
)

var uncoreKinds = map[string]*Family{uncore.SampleDDIO: uncoreDDIO, uncore.SampleIIO: uncoreIIO, uncore.SampleFreeRunning: uncoreFree,
	uncore.SampleEnabled: uncoreOn, uncore.SampleRunning: uncoreRun, uncore.SampleAvailable: uncoreAvail}

func init() {
	register(Registration{
		Name:        "uncore",
		Help:        "Intel uncore PMUs through perf_event_open: DDIO hits and misses of device requests per socket (CHA), PCIe bytes per IIO stack mapped to the NICs behind it",
		Requires:    "an Intel server CPU the kernel drives uncore PMUs for (sysfs bus/event_source/devices/uncore_cha_*, uncore_iio_*; none in a VM); DDIO and IIO traffic need a model in the event table (docs/collectors/uncore.md); CAP_PERFMON (Linux 5.8+) or CAP_SYS_ADMIN, or kernel.perf_event_paranoid <= 0.",
		DeviceLabel: true,
		Flags:       func(*FlagSet) Builder { return NewUncoreCollector },
	})
}

type uncoreCollector struct {
	host   *uncore.Host
	shared Shared
}

// NewUncoreCollector opens the host's uncore counters; a host without
// uncore PMUs, or without anything to count on them, is unsupported.
func NewUncoreCollector(logger *slog.Logger, shared Shared) (Collector, error) {
	shared.SysFS, shared.ProcFS = sysRoot(shared.SysFS), procRoot(shared.ProcFS)
	model, cpu, err := uncore.Detect(shared.ProcFS)
	if err != nil {
		return nil, err
	}
	h, err := uncore.Open(shared.SysFS, model)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", cpu, err)
	}
	if model == nil {
		logger.Info("CPU model not in the uncore event table: only the free-running IIO bandwidth is exported", "cpu", cpu)
	}
	if u := h.Unavailable(); len(u) > 0 {
		logger.Info("uncore events not supported on this host; their families are not exported", "events", u)
	}
	return &uncoreCollector{host: h, shared: shared}, nil
}

func (c *uncoreCollector) Update(_ context.Context, snap *LinkSnapshot, ch chan<- prometheus.Metric) error {
	r, err := c.host.Read()
	for _, s := range r.Samples() {
		c.shared.Filter.Families.send(ch, uncoreKinds[s.Kind], s.Value, s.Labels...)
	}
	links, lerr := snap.Get()
	if links == nil {
		return errors.Join(err, lerr)
	}
	for _, l := range links.All() {
		if !c.shared.Filter.Devices.selects(l.Label) {
			continue // and its sysfs is not read
		}
		for _, s := range c.host.StacksOf(c.shared.SysFS, l.Name) {
			c.shared.Filter.Families.send(ch, uncoreDev, 1, l.Label, strconv.Itoa(s.Socket), strconv.Itoa(s.IIO), s.RootBus)
		}
	}
	return errors.Join(err, lerr)
}

func (c *uncoreCollector) Close() error { return c.host.Close() }
