package uncore

import (
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestReadThroughSoftwarePMU runs the read path for real (discover,
// encode, perf_event_open on the cpumask CPU, enable, read with time
// enabled and running, scale, close): a free-running IIO box whose type
// file names PERF_TYPE_SOFTWARE, so that its bw_in_port0
// ("event=0x0": cpu-clock, nanoseconds) counts on any host. Its scale is
// the kernel's for the bandwidth counters, 3.814697266e-6 MiB: 4 bytes a
// count.
func TestReadThroughSoftwarePMU(t *testing.T) {
	testenv.Privileged(t)
	sys := t.TempDir()
	write(t, filepath.Join(sys, "devices/system/cpu/cpu0/topology/physical_package_id"), "0\n")
	events := map[string]string{"bw_in_port0": "event=0x0,umask=0x0", "bw_in_port0.scale": "3.814697266e-6", "bw_in_port0.unit": "MiB"}
	writePMU(t, sys, "uncore_iio_free_running_0", 1, kindSpec{freeRunningFormats, events}, nil)
	writePMU(t, sys, "uncore_iio_0", typeIIO, kindSpec{formats: snrIIO}, map[string]string{"die0": "0000:3a"})
	for _, pmu := range []string{"uncore_iio_free_running_0", "uncore_iio_0"} {
		write(t, filepath.Join(sys, "bus/event_source/devices", pmu, "cpumask"), "0\n")
	}
	h, err := Open(sys, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if !h.Available()[KindFreeRunning] {
		t.Errorf("available %v", h.Available())
	}
	start := time.Now()
	first := readOne(t, h)
	time.Sleep(20 * time.Millisecond)
	second := readOne(t, h)
	elapsed := time.Since(start)
	if first.Stack != (Stack{Socket: 0, IIO: 0, RootBus: "0000:3a"}) || first.Port != "0" || first.Direction != "in" {
		t.Errorf("labels %+v", first)
	}
	// cpu-clock counts the nanoseconds the event is enabled: between the
	// reads, about the time the test measured around them. The kernel's
	// clock and the test's are not the same one (an emulated guest's
	// drift apart), so only the order of magnitude is held: bytes of 4
	// a nanosecond, not of one a microsecond or a thousand a nanosecond.
	counted := time.Duration((second.Bytes - first.Bytes) / 4)
	if counted < 10*time.Millisecond || counted > 2*elapsed {
		t.Errorf("counted %v between reads %v apart", counted, elapsed)
	}
	if math.Abs(second.Bytes/4-math.Round(second.Bytes/4)) > 1e-3*second.Bytes/4 {
		t.Errorf("bytes %v are not 4 per count", second.Bytes)
	}
	if err := h.Close(); err != nil {
		t.Error(err)
	}
	if err := h.Close(); err != nil {
		t.Errorf("second close: %v", err)
	}
}

func readOne(t *testing.T, h *Host) FreeRunningCount {
	t.Helper()
	r, err := h.Read()
	if err != nil {
		t.Fatal(err)
	}
	if len(r.FreeRunning) != 1 || len(r.DDIO) != 0 || len(r.IIO) != 0 {
		t.Fatalf("reading %+v, want one free-running count", r)
	}
	return r.FreeRunning[0]
}
