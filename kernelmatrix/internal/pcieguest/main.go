// Command pcieguest is the guest half of kernels.TestPCIeTopology: inside
// a QEMU guest built with two NUMA nodes and NICs behind PCIe root ports,
// it runs the exporter, injects AER errors into a root port through the
// kernel's aer_inject, moves a NIC's RX IRQ between CPUs of the two nodes
// with traffic on it, and writes a scrape after each step to -out. The
// test on the host checks the scrapes against the topology it built.
package main

import (
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/guest"
)

func main() {
	guest.Main("pcieguest", func(exporter, out string, args []string) error {
		fs := flag.NewFlagSet("pcieguest", flag.ContinueOnError)
		inject := fs.String("inject", "", "PCI address of the root port to inject correctable errors into")
		errorsN := fs.Int("errors", 0, "correctable errors (Bad TLP) to inject")
		rx := fs.String("rx", "", "the NIC that receives, under the rxq collector")
		tx := fs.String("tx", "", "the NIC that sends to it")
		frames := fs.Uint64("frames", 500, "frames per CPU step")
		if err := fs.Parse(args); err != nil {
			return err
		}
		return run(exporter, out, *inject, *errorsN, *rx, *tx, *frames)
	})
}

const addr = "127.0.0.1:19739"

func run(exporter, out, inject string, errorsN int, rx, tx string, frames uint64) error {
	e, err := guest.StartExporter(exporter, addr, "--collector.disable-defaults",
		"--collector.pcie", "--collector.rxq", "--collector.rxq.device="+rx, "--collector.rxq.action=drop")
	if err != nil {
		return err
	}
	defer e.Stop()
	scrape := func(out, name string) (string, error) {
		b, err := e.Scrape()
		if err != nil {
			return "", err
		}
		return string(b), os.WriteFile(filepath.Join(out, name+".prom"), b, 0o644)
	}
	if _, err := scrape(out, "initial"); err != nil {
		return err
	}
	if err := injectCorrectable(inject, errorsN); err != nil {
		return err
	}
	body, err := scrape(out, "aer")
	if err != nil {
		return err
	}
	irq, err := rxIRQ(body, rx)
	if err != nil {
		return err
	}
	for _, cpu := range []int{0, 1} {
		if err := os.WriteFile(fmt.Sprintf("/proc/irq/%s/smp_affinity_list", irq), []byte(strconv.Itoa(cpu)), 0o644); err != nil {
			return err
		}
		// x86 moves an IRQ when it next fires: a few frames first.
		if err := sendCounted(e, tx, rx, 20); err != nil {
			return err
		}
		if _, err := scrape(out, fmt.Sprintf("cpu%d-before", cpu)); err != nil {
			return err
		}
		if err := sendCounted(e, tx, rx, frames); err != nil {
			return err
		}
		if _, err := scrape(out, fmt.Sprintf("cpu%d-after", cpu)); err != nil {
			return err
		}
	}
	return nil
}

// injectCorrectable writes n Bad TLP errors (PCI_ERR_COR_BAD_TLP) for
// the device at addr to /dev/aer_inject (struct aer_error_inj of
// drivers/pci/pcie/aer_inject.c). The kernel handles each as a real AER
// interrupt, in a work queue after the write returns, and refuses the
// next with EBUSY while one is in flight. Each error is written once the
// kernel has counted the one before (the device's aer_dev_correctable),
// and it returns once the last is counted: a fixed pause was too short
// under the emulator on a loaded machine (4 of 5 counted at the scrape).
func injectCorrectable(addr string, n int) error {
	counted, err := badTLPs(addr)
	if err != nil {
		return err
	}
	var domain, bus, dev, fn uint32
	if _, err := fmt.Sscanf(addr, "%x:%x:%x.%x", &domain, &bus, &dev, &fn); err != nil {
		return fmt.Errorf("PCI address %q: %w", addr, err)
	}
	f, err := os.OpenFile("/dev/aer_inject", os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	rec := make([]byte, 32)
	rec[0], rec[1], rec[2] = byte(bus), byte(dev), byte(fn)
	binary.LittleEndian.PutUint32(rec[8:], 1<<6) // cor_status: Bad TLP
	binary.LittleEndian.PutUint32(rec[28:], domain)
	for i := 0; i < n; i++ {
		deadline := time.Now().Add(5 * time.Second)
		for {
			_, err := f.Write(rec)
			if err == nil {
				break
			}
			if !errors.Is(err, unix.EBUSY) || time.Now().After(deadline) {
				return fmt.Errorf("injecting error %d of %d: %w", i+1, n, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
		if err := waitBadTLPs(addr, counted+uint64(i)+1); err != nil {
			return err
		}
	}
	return nil
}

// badTLPs is the kernel's count of Bad TLP errors of the device at addr.
func badTLPs(addr string) (uint64, error) {
	f := filepath.Join("/sys/bus/pci/devices", addr, "aer_dev_correctable")
	b, err := os.ReadFile(f)
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if w := strings.Fields(line); len(w) == 2 && w[0] == "BadTLP" {
			return strconv.ParseUint(w[1], 10, 64)
		}
	}
	return 0, fmt.Errorf("%s has no BadTLP line:\n%s", f, b)
}

// waitBadTLPs waits up to 30 s for the kernel to have counted want Bad
// TLP errors of the device at addr.
func waitBadTLPs(addr string, want uint64) error {
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		n, err := badTLPs(addr)
		if err != nil || n >= want {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the kernel counted %d Bad TLP errors at %s 30 s after injecting, want %d", n, addr, want)
		}
	}
}

// rxIRQ is the IRQ the exporter names for queue 0 of dev.
func rxIRQ(scrape, dev string) (string, error) {
	mfs, err := exportertest.Decode(scrape)
	if err != nil {
		return "", err
	}
	if ms := mfs.Series("xdp_pcie_rx_queue_numa_remote_ratio", "device", dev, "queue", "0"); len(ms) > 0 {
		return exportertest.Label(ms[0], "irq"), nil
	}
	return "", fmt.Errorf("the exporter names no IRQ for queue 0 of %s", dev)
}

// sendCounted sends n frames from tx to rx's MAC, paced so the emulated
// NIC's ring never overflows, and waits up to 30 s for the rxq collector
// to have counted them on rx: the emulated NIC delivers them after the
// send returns, later on a loaded machine than any fixed pause would
// allow for.
func sendCounted(e *guest.Exporter, tx, rx string, n uint64) error {
	before, err := rxqPackets(e, rx)
	if err != nil {
		return err
	}
	if err := guest.Send(tx, rx, n, 2000); err != nil {
		return err
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		got, err := rxqPackets(e, rx)
		if err != nil || got >= before+float64(n) {
			return err
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %v of %d frames counted 30 s after sending", rx, got-before, n)
		}
	}
}

// rxqPackets is the rxq collector's packet count of dev, over queues and
// CPUs.
func rxqPackets(e *guest.Exporter, dev string) (float64, error) {
	b, err := e.Scrape()
	if err != nil {
		return 0, err
	}
	mfs, err := exportertest.Decode(string(b))
	if err != nil {
		return 0, err
	}
	n, _ := mfs.Sum("xdp_rxq_packets_total", "device", dev)
	return n, nil
}
