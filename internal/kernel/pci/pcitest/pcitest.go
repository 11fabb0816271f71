// Package pcitest writes the sysfs and procfs trees the pci reader's
// tests and the collectors' read: a two-socket host with a NIC behind a
// PCIe switch, a virtio NIC, a USB NIC and a veth, laid out as
// Documentation/ABI/testing/sysfs-bus-pci and drivers/pci/pcie/aer.c
// print them. It is built in code, not committed: sysfs names hold ':',
// which a Go module's files may not.
package pcitest

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The AER files as the kernel prints them (drivers/pci/pcie/aer.c, the
// example of Documentation/ABI/testing/sysfs-bus-pci-devices-aer_stats),
// with errors counted on a NIC whose link retrains.
const (
	AERCorrectable = "RxErr 3\nBadTLP 12\nBadDLLP 0\nRollover 0\nTimeout 1\nNonFatalErr 0\nCorrIntErr 0\nHeaderOF 0\nTOTAL_ERR_COR 16\n"
	AERNonFatal    = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 2\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nTOTAL_ERR_NONFATAL 2\n"
	AERFatal       = "Undefined 0\nDLP 0\nSDES 0\nTLP 0\nFCP 0\nCmpltTO 0\nCmpltAbrt 0\nUnxCmplt 0\nRxOF 0\nMalfTLP 0\nECRC 0\nUnsupReq 0\nACSViol 0\nUncorrIntErr 0\nBlockedTLP 0\nAtomicOpBlocked 0\nTLPBlockedErr 0\nTOTAL_ERR_FATAL 0\n"
)

// TwoSocketHost writes a sysfs and a procfs tree (its /proc/irq) as a
// two-socket host shows them and returns their roots:
//   - mlx5p0 (0000:03:00.0, a x16 Gen4 ConnectX on node 1) behind a
//     switch (0000:02:01.0 downstream, 0000:01:00.0 upstream) in a x8
//     root port, 0000:00:01.0. The NIC's link trained at 8 GT/s x8 where
//     both ends can do 16 GT/s x16 (degraded); the switch's link to the
//     root port runs x8, all the root port can do (not degraded). AER
//     counts errors; four RX queues on IRQs mlx5_comp0..3 whose
//     effective CPUs are remote, local, local, and one of each;
//   - eth1, a virtio NIC on conventional PCI (0000:00:03.0, no link
//     files, no NUMA node, no AER);
//   - usb0, a USB NIC below the host controller's function;
//   - veth0, virtual.
func TwoSocketHost(t testing.TB) (sys, proc string) {
	t.Helper()
	root := t.TempDir()
	sys, proc = filepath.Join(root, "sys"), filepath.Join(root, "proc")
	irq := filepath.Join(proc, "irq")
	write := func(path, content string) { WriteFile(t, path, content) }
	link := func(target, name string) { Symlink(t, target, name) }
	linkFiles := func(dir, speed, width, maxSpeed, maxWidth string) {
		write(filepath.Join(dir, "current_link_speed"), speed+"\n")
		write(filepath.Join(dir, "current_link_width"), width+"\n")
		write(filepath.Join(dir, "max_link_speed"), maxSpeed+"\n")
		write(filepath.Join(dir, "max_link_width"), maxWidth+"\n")
	}
	write(filepath.Join(sys, "bus", "pci", "drivers_autoprobe"), "1\n")
	rp := filepath.Join(sys, "devices", "pci0000:00", "0000:00:01.0")
	up := filepath.Join(rp, "0000:01:00.0")
	down := filepath.Join(up, "0000:02:01.0")
	nic := filepath.Join(down, "0000:03:00.0")
	linkFiles(rp, "16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "8")
	linkFiles(up, "16.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16")
	linkFiles(down, "8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16")
	linkFiles(nic, "8.0 GT/s PCIe", "8", "16.0 GT/s PCIe", "16")
	write(filepath.Join(nic, "numa_node"), "1\n")
	write(filepath.Join(nic, "aer_dev_correctable"), AERCorrectable)
	write(filepath.Join(nic, "aer_dev_nonfatal"), AERNonFatal)
	write(filepath.Join(nic, "aer_dev_fatal"), AERFatal)
	write(filepath.Join(nic, "net", "mlx5p0", "ifindex"), "4\n")
	link("../../devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:01.0/0000:03:00.0/net/mlx5p0", filepath.Join(sys, "class", "net", "mlx5p0"))
	link("../../../0000:03:00.0", filepath.Join(nic, "net", "mlx5p0", "device"))
	for i, cpus := range []string{"0", "4", "5-6", "2,5"} {
		n := 40 + i
		write(filepath.Join(nic, "msi_irqs", strconv.Itoa(n)), "msix\n")
		write(filepath.Join(irq, strconv.Itoa(n), "effective_affinity_list"), cpus+"\n")
		if err := os.MkdirAll(filepath.Join(irq, strconv.Itoa(n), "mlx5_comp"+strconv.Itoa(i)+"@pci:0000:03:00.0"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	// The async event vector serves no queue.
	write(filepath.Join(nic, "msi_irqs", "39"), "msix\n")
	write(filepath.Join(irq, "39", "effective_affinity_list"), "1\n")
	if err := os.MkdirAll(filepath.Join(irq, "39", "mlx5_async0@pci:0000:03:00.0"), 0o755); err != nil {
		t.Fatal(err)
	}

	virtio := filepath.Join(sys, "devices", "pci0000:00", "0000:00:03.0")
	write(filepath.Join(virtio, "numa_node"), "-1\n")
	write(filepath.Join(virtio, "virtio2", "net", "eth1", "ifindex"), "2\n")
	link("../../devices/pci0000:00/0000:00:03.0/virtio2/net/eth1", filepath.Join(sys, "class", "net", "eth1"))
	link("../../../virtio2", filepath.Join(virtio, "virtio2", "net", "eth1", "device"))

	// A USB NIC: its device is a USB interface below the host
	// controller's PCI function, which is not the NIC's.
	usb := filepath.Join(sys, "devices", "pci0000:00", "0000:00:14.0", "usb2", "2-1", "2-1:1.0")
	linkFiles(filepath.Join(sys, "devices", "pci0000:00", "0000:00:14.0"), "5.0 GT/s PCIe", "1", "5.0 GT/s PCIe", "1")
	write(filepath.Join(usb, "net", "usb0", "ifindex"), "6\n")
	link("../../devices/pci0000:00/0000:00:14.0/usb2/2-1/2-1:1.0/net/usb0", filepath.Join(sys, "class", "net", "usb0"))
	link("../../../2-1:1.0", filepath.Join(usb, "net", "usb0", "device"))

	write(filepath.Join(sys, "devices", "virtual", "net", "veth0", "ifindex"), "5\n")
	link("../../devices/virtual/net/veth0", filepath.Join(sys, "class", "net", "veth0"))

	write(filepath.Join(sys, "devices", "system", "node", "node0", "cpulist"), "0-3\n")
	write(filepath.Join(sys, "devices", "system", "node", "node1", "cpulist"), "4-7\n")

	// /proc/interrupts: queue q's vector (IRQ 40+q) fired 1000*(q+1) times
	// on each CPU of its effective affinity; the async vector 7 times.
	rows := map[int][]int{39: {1}, 40: {0}, 41: {4}, 42: {5, 6}, 43: {2, 5}}
	WriteInterrupts(t, proc, 8, func(irq, cpu int) uint64 {
		if !slices.Contains(rows[irq], cpu) {
			return 0
		}
		if irq == 39 {
			return 7
		}
		return uint64(1000 * (irq - 39))
	}, 39, 40, 41, 42, 43)
	return sys, proc
}

// WriteInterrupts writes proc/interrupts with cpus columns and a row per
// irq, count(irq, cpu) in each cell, as x86 prints MSI-X vectors.
func WriteInterrupts(t testing.TB, proc string, cpus int, count func(irq, cpu int) uint64, irqs ...int) {
	t.Helper()
	var b strings.Builder
	for cpu := range cpus {
		fmt.Fprintf(&b, "       CPU%d", cpu)
	}
	b.WriteString("\n")
	for _, irq := range irqs {
		fmt.Fprintf(&b, "%4d:", irq)
		for cpu := range cpus {
			fmt.Fprintf(&b, " %10d", count(irq, cpu))
		}
		fmt.Fprintf(&b, "  IR-PCI-MSIX-0000:03:00.0 %d-edge      vector%d\n", irq, irq)
	}
	b.WriteString(" NMI:" + strings.Repeat("          0", cpus) + "   Non-maskable interrupts\nERR:          0\n")
	WriteFile(t, filepath.Join(proc, "interrupts"), b.String())
}

// WriteFile writes path, making its directories.
func WriteFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// Symlink makes the symlink name to target, making its directories.
func Symlink(t testing.TB, target, name string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, name); err != nil {
		t.Fatal(err)
	}
}
