package pci

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/pci/pcitest"
)

// aer is the AER counts pcitest's NIC reports, by type, in file order.
func aer(t *testing.T) []AERCount {
	t.Helper()
	var out []AERCount
	for typ, text := range map[string]string{"correctable": pcitest.AERCorrectable, "nonfatal": pcitest.AERNonFatal, "fatal": pcitest.AERFatal} {
		counts, err := ParseAER([]byte(text), typ)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, counts...)
	}
	return out
}

// TestReadNIC follows each device of the two-socket host to its PCI
// function: mlx5p0 through a switch to its root port, with link files,
// AER, NUMA node and MSI-X vectors; eth1 (virtio) to the function its
// virtio device sits on, without link files; usb0 and veth0 to none.
func TestReadNIC(t *testing.T) {
	sys, _ := pcitest.TwoSocketHost(t)
	nic, err := ReadNIC(sys, "mlx5p0")
	if err != nil {
		t.Fatal(err)
	}
	if nic.Address != "0000:03:00.0" || nic.NUMANode != 1 {
		t.Errorf("mlx5p0 is %s on node %d, want 0000:03:00.0 on node 1", nic.Address, nic.NUMANode)
	}
	want := []Hop{
		{Address: "0000:03:00.0", Speed: 8, MaxSpeed: 16, Width: 8, MaxWidth: 16},
		{Address: "0000:02:01.0", Speed: 8, MaxSpeed: 16, Width: 8, MaxWidth: 16},
		{Address: "0000:01:00.0", Speed: 16, MaxSpeed: 16, Width: 8, MaxWidth: 16},
		{Address: "0000:00:01.0", Speed: 16, MaxSpeed: 16, Width: 8, MaxWidth: 8},
	}
	got := slices.Clone(nic.Hops)
	gotAER := got[0].AER
	for i := range got {
		got[i].AER = nil
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("hops\n%+v\nwant\n%+v", got, want)
	}
	wantAER := aer(t)
	slices.SortFunc(gotAER, func(a, b AERCount) int { return cmpAER(a, b) })
	slices.SortFunc(wantAER, func(a, b AERCount) int { return cmpAER(a, b) })
	if !reflect.DeepEqual(gotAER, wantAER) {
		t.Errorf("AER\n%v\nwant\n%v", gotAER, wantAER)
	}
	if slices.Sort(nic.MSIIRQs); !slices.Equal(nic.MSIIRQs, []uint32{39, 40, 41, 42, 43}) {
		t.Errorf("MSI-X vectors %v", nic.MSIIRQs)
	}
	// A link is seen from the NIC, and from the switch's upstream port:
	// the NIC's trained at 8 GT/s x8 where both ends can do 16 GT/s x16,
	// the switch's runs x8, all its root port can do.
	for i, wantDegraded := range map[int]bool{0: true, 2: false} {
		if degraded, known := LinkDegraded(nic.Hops, i); !known || degraded != wantDegraded {
			t.Errorf("hop %d degraded %v (known %v), want %v", i, degraded, known, wantDegraded)
		}
	}

	virtio, err := ReadNIC(sys, "eth1")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(virtio, &NIC{Address: "0000:00:03.0", NUMANode: -1, Hops: []Hop{{Address: "0000:00:03.0"}}}) {
		t.Errorf("eth1 %+v", virtio)
	}
	if _, known := LinkDegraded(virtio.Hops, 0); known {
		t.Error("a function without link files has a known link")
	}
	for _, dev := range []string{"usb0", "veth0"} {
		if _, err := ReadNIC(sys, dev); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s: %v, want no PCI function", dev, err)
		}
	}
}

func cmpAER(a, b AERCount) int {
	if a.Type != b.Type {
		if a.Type < b.Type {
			return -1
		}
		return 1
	}
	switch {
	case a.Name < b.Name:
		return -1
	case a.Name > b.Name:
		return 1
	}
	return 0
}

// TestRootBusNodesAndQueues: the root bus above a NIC, the CPUs of each
// NUMA node, and the RX queues named by the driver's vector names, where
// the netdev family does not link them.
func TestRootBusNodesAndQueues(t *testing.T) {
	sys, proc := pcitest.TwoSocketHost(t)
	if bus, err := RootBus(sys, "mlx5p0"); err != nil || bus != "0000:00" {
		t.Errorf("root bus %q (%v), want 0000:00", bus, err)
	}
	nodes, err := ReadNodeCPUs(sys)
	if err != nil {
		t.Fatal(err)
	}
	if want := (NodeCPUs{Count: 2, Node: map[int]int{0: 0, 1: 0, 2: 0, 3: 0, 4: 1, 5: 1, 6: 1, 7: 1}}); !reflect.DeepEqual(nodes, want) {
		t.Errorf("nodes %+v", nodes)
	}
	nic, err := ReadNIC(sys, "mlx5p0")
	if err != nil {
		t.Fatal(err)
	}
	irq := filepath.Join(proc, "irq")
	queues := RxQueueIRQs(irq, nic, 4, "mlx5p0", nil)
	slices.SortFunc(queues, func(a, b QueueIRQ) int { return a.Queue - b.Queue })
	if want := []QueueIRQ{{0, 40}, {1, 41}, {2, 42}, {3, 43}}; !slices.Equal(queues, want) {
		t.Errorf("queues by vector name %v, want %v (the async vector 39 serves none)", queues, want)
	}
	known := map[netdev.QueueKey]uint32{{Ifindex: 4, Queue: 0}: 77, {Ifindex: 9, Queue: 0}: 78}
	if got := RxQueueIRQs(irq, nic, 4, "mlx5p0", known); !slices.Equal(got, []QueueIRQ{{0, 77}}) {
		t.Errorf("queues the kernel links %v, want its one of ifindex 4", got)
	}
}

// TestCheckBus: a sysfs without bus/pci is not supported here.
func TestCheckBus(t *testing.T) {
	sys, _ := pcitest.TwoSocketHost(t)
	if err := CheckBus(sys); err != nil {
		t.Fatal(err)
	}
	if err := CheckBus(t.TempDir()); !errors.Is(err, ErrNoBus) || !errors.Is(err, errors.ErrUnsupported) {
		t.Errorf("CheckBus of an empty sysfs = %v, want ErrNoBus", err)
	}
}
