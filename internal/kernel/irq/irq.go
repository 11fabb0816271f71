// Package irq reads an IRQ's CPU affinity from /proc/irq/N.
package irq

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/cpulist"
)

// Affinity is an IRQ's CPU lists as the kernel prints them: the CPUs it
// may run on (smp_affinity_list) and those it does run on
// (effective_affinity_list); "" where a file is missing.
type Affinity struct{ Allowed, Effective string }

func path(procRoot string, irq uint32, file string) string {
	return filepath.Join(procRoot, "irq", strconv.FormatUint(uint64(irq), 10), file)
}

// ReadAffinity reads both lists under the procfs mount procRoot. A missing
// file (an IRQ freed since it was listed, or effective_affinity_list on a
// kernel without CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK) leaves its list
// empty and is returned in the error with what was read.
func ReadAffinity(procRoot string, irq uint32) (Affinity, error) {
	var a Affinity
	var errs []error
	for file, out := range map[string]*string{"smp_affinity_list": &a.Allowed, "effective_affinity_list": &a.Effective} {
		b, err := os.ReadFile(path(procRoot, irq, file))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		*out = strings.TrimSpace(string(b))
	}
	return a, errors.Join(errs...)
}

// EffectiveCPUs is the CPUs the IRQ runs on: its effective affinity, or
// where the kernel has none, the CPUs it may run on. Empty when the IRQ is
// gone.
func EffectiveCPUs(procRoot string, irq uint32) ([]int, error) {
	cpus, err := cpulist.Read(path(procRoot, irq, "effective_affinity_list"))
	if err != nil || len(cpus) == 0 {
		cpus, err = cpulist.Read(path(procRoot, irq, "smp_affinity_list"))
	}
	return cpus, err
}
