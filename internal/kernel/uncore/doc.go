// Package uncore counts what the CPU's uncore sees of PCIe devices,
// through the Intel uncore PMUs the kernel registers in sysfs
// (bus/event_source/devices/uncore_cha_*, uncore_iio_*,
// uncore_iio_free_running_*): per socket, the device requests to memory
// that hit and missed the last-level cache (DDIO), and per IIO stack (a
// PCIe root complex, mapped to its root bus through the kernel's die<N>
// files) the bytes the devices read and wrote and the CPUs' MMIO, the
// figures of perf iostat and Intel PCM's pcm-pcie.
//
// Event encodings come from Linux perf's pmu-events JSON for each model
// (events/*.json) and are applied through each PMU's own sysfs format/
// files, as perf applies them; the free-running bandwidth counters are
// the kernel's own named events with their .scale and .unit. Counters
// are opened once per box and read when asked; the time each group was
// enabled and running is returned with the counts.
package uncore
