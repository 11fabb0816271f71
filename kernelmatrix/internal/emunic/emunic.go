// Package emunic is the emulated NICs of kernelmatrix.TestEmulatedNICs:
// the QEMU devices the host test adds to the guest, and what the guest
// program (nicguest) reports back about each.
package emunic

import "fmt"

// NIC is one emulated NIC under test and the virtio-net NIC that feeds
// it, on a QEMU hub of their own, found in the guest by MAC address.
type NIC struct {
	// Driver is the Linux driver of the emulated device.
	Driver    string `json:"driver"`
	Device    string `json:"device"` // QEMU's -device name
	MAC       string `json:"mac"`
	FeederMAC string `json:"feeder_mac"`
	// RxRing is the RX ring size set before the flood (0: left alone).
	RxRing int `json:"rx_ring"`
	// What the guest reports: the names it gave the two, and the frames
	// the feeder sent.
	Dev    string `json:"dev"`
	Feeder string `json:"feeder"`
	Sent   uint64 `json:"sent"`
}

// Frames is what each NIC's feeder sends.
const Frames = 20_000

// NICs are QEMU 7.2's emulations whose Linux drivers the test runs: the
// ring sizes are the drivers' minimums (E1000_MIN_RXD; vmxnet3 rounds
// to VMXNET3_RING_SIZE_ALIGN); 8139cp has no ring parameters. rtl8139
// stands for a driver the exporter has no name table for.
var NICs = []NIC{
	{Driver: "e1000e", Device: "e1000e", MAC: "52:54:00:37:00:01", FeederMAC: "52:54:00:37:00:02", RxRing: 64},
	{Driver: "vmxnet3", Device: "vmxnet3", MAC: "52:54:00:37:00:11", FeederMAC: "52:54:00:37:00:12", RxRing: 32},
	{Driver: "8139cp", Device: "rtl8139", MAC: "52:54:00:37:00:21", FeederMAC: "52:54:00:37:00:22"},
}

// QEMUArgs are the -netdev and -device arguments of nics: each NIC and
// its feeder on hub 10+i, on the guest's main PCIe bus.
func QEMUArgs(nics []NIC) []string {
	var args []string
	for i, n := range nics {
		hub := 10 + i
		args = append(args,
			"-netdev", fmt.Sprintf("hubport,id=emu%d,hubid=%d", i, hub),
			"-device", fmt.Sprintf("%s,netdev=emu%d,mac=%s,bus=pcie.0", n.Device, i, n.MAC),
			"-netdev", fmt.Sprintf("hubport,id=feed%d,hubid=%d", i, hub),
			"-device", fmt.Sprintf("virtio-net-pci,netdev=feed%d,mac=%s,bus=pcie.0", i, n.FeederMAC))
	}
	return args
}
