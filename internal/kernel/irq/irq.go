// Package irq reads an IRQ's CPU affinity from /proc/irq/N and its
// interrupt count from /proc/interrupts.
package irq

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"

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

// Interrupts reads /proc/interrupts into a buffer it keeps between
// scrapes (600 kB on a host of 128 CPUs); its zero value is ready, and
// one read runs at a time.
type Interrupts struct {
	mu  sync.Mutex
	buf []byte
}

// Counts is the interrupts each of irqs fired, summed over the CPUs, from
// /proc/interrupts under procRoot. An IRQ missing from the file (freed
// since it was listed) is missing from the map. The file has a row per IRQ
// and a column per CPU; only the rows asked for are parsed, so what the
// exporter sends stays one number per queue however many CPUs and IRQs
// the host has.
//
// It is written by hand: prometheus/procfs (v0.23.0) parses every row of
// the file into a string per CPU, 3 MB of garbage per scrape and 13% more
// time for the whole scrape of a host of 128 CPUs and 428 IRQs (the
// collector's fixture host, BenchmarkHostScrape), to sum 128 rows of it.
func (r *Interrupts) Counts(procRoot string, irqs []uint32) (map[uint32]uint64, error) {
	path := filepath.Join(procRoot, "interrupts")
	r.mu.Lock()
	defer r.mu.Unlock()
	b, err := readAll(path, r.buf[:0])
	r.buf = b
	if err != nil {
		return nil, err
	}
	want := make(map[uint32]bool, len(irqs))
	for _, n := range irqs {
		want[n] = true
	}
	header, rest, _ := bytes.Cut(b, []byte("\n"))
	cpus := len(bytes.Fields(header))
	out := make(map[uint32]uint64, len(irqs))
	for len(rest) > 0 {
		var line []byte
		line, rest, _ = bytes.Cut(rest, []byte("\n"))
		n, cells, ok := irqRow(line)
		if !ok || !want[n] {
			continue
		}
		sum, err := sumCells(cells, cpus)
		if err != nil {
			return nil, fmt.Errorf("%s: IRQ %d: %w", path, n, err)
		}
		out[n] = sum
	}
	return out, nil
}

// readAll reads a procfs file, whose size stat does not give, into buf.
func readAll(path string, buf []byte) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return buf, err
	}
	defer f.Close()
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, make([]byte, max(4096, cap(buf)))...)[:len(buf)]
		}
		n, err := f.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return buf, err
		}
	}
}

// irqRow splits "  24:  4012  0  PCI-MSIX ..." into its IRQ number and
// what follows the colon; ok is false for rows without a number (NMI,
// LOC, ERR).
func irqRow(line []byte) (uint32, []byte, bool) {
	line = bytes.TrimLeft(line, " ")
	num, cells, ok := bytes.Cut(line, []byte(":"))
	if !ok || len(num) == 0 {
		return 0, nil, false
	}
	n, err := strconv.ParseUint(string(num), 10, 32)
	return uint32(n), cells, err == nil
}

// sumCells adds the first cpus space-separated counts of cells.
func sumCells(cells []byte, cpus int) (uint64, error) {
	var sum uint64
	for range cpus {
		cells = bytes.TrimLeft(cells, " ")
		end := bytes.IndexByte(cells, ' ')
		if end < 0 {
			end = len(cells)
		}
		var v uint64
		if end == 0 {
			return 0, errors.New("fewer counts than CPUs")
		}
		for _, c := range cells[:end] {
			if c < '0' || c > '9' {
				return 0, fmt.Errorf("count %q", cells[:end])
			}
			v = v*10 + uint64(c-'0')
		}
		sum += v
		cells = cells[end:]
	}
	return sum, nil
}
