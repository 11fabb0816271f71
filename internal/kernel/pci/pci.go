// Package pci reads what sysfs and /proc/irq say about the PCI functions
// behind network devices: the path from a NIC up to its root port with
// each link's speed and width, AER error counts, the NIC's NUMA node and
// MSI IRQs, the CPUs of each NUMA node, and which RX queue an IRQ serves.
//
// It reads the files of the few functions on each NIC's path by hand.
// prometheus/procfs's PciDevices parses every PCI device of the host on
// each call and fails all of them on one it cannot parse, and its AER
// counters read /sys/class/net/X/device, which for a virtio NIC is the
// virtio device, not its PCI function, with a fixed set of error names and
// zeros where the files are absent.
package pci

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/cpulist"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
)

// address matches a PCI function's sysfs directory (domain:bus:slot.fn).
var address = regexp.MustCompile(`^[0-9a-f]{4}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$`)

// IsAddress reports whether s is a PCI function's address as sysfs and
// ETHTOOL_GDRVINFO's bus_info print it (0000:3b:00.0).
func IsAddress(s string) bool { return address.MatchString(s) }

// virtioDevice matches a virtio device's directory (virtio3).
var virtioDevice = regexp.MustCompile(`^virtio[0-9]+$`)

// Hop is one PCI function on the path from a NIC up to its root port.
type Hop struct {
	Address         string
	Speed, MaxSpeed float64 // GT/s; 0 where the file is absent
	Width, MaxWidth int
	AER             []AERCount // absent without AER
}

// AERCount is one line of an aer_dev_* file.
type AERCount struct {
	Type, Name string
	Count      uint64
}

// NIC is what sysfs says about a network device's PCI function.
type NIC struct {
	Address  string
	NUMANode int
	Hops     []Hop // [0] is the NIC's function
	MSIIRQs  []uint32
}

// ReadNIC follows /sys/class/net/NAME/device to the PCI function that
// backs the device (for virtio-net the device is a virtio device whose
// parent is the function) and reads it and every PCI function above it.
// fs.ErrNotExist means the device has no PCI function. On a read error
// it returns what it read with the error.
func ReadNIC(sys, name string) (*NIC, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(sys, "class", "net", name, "device"))
	if err != nil {
		return nil, err
	}
	// A virtio device sits on its PCI function; a device of another bus
	// (a USB NIC under its host controller's function) has none of its
	// own.
	if virtioDevice.MatchString(filepath.Base(real)) {
		real = filepath.Dir(real)
	}
	var chain []string
	for p := real; address.MatchString(filepath.Base(p)); p = filepath.Dir(p) {
		chain = append(chain, p)
	}
	if len(chain) == 0 {
		return nil, fmt.Errorf("%s is not a PCI function: %w", real, os.ErrNotExist)
	}
	nic := &NIC{Address: filepath.Base(chain[0]), NUMANode: -1}
	var errs []error
	if s, err := readTrimmed(filepath.Join(chain[0], "numa_node")); err == nil {
		if n, err := strconv.Atoi(s); err == nil {
			nic.NUMANode = n
		}
	}
	for _, dir := range chain {
		h, err := readHop(dir)
		if err != nil {
			errs = append(errs, err)
		}
		for _, typ := range []string{"correctable", "nonfatal", "fatal"} {
			counts, err := readAER(filepath.Join(dir, "aer_dev_"+typ), typ)
			if err != nil && !os.IsNotExist(err) {
				errs = append(errs, err)
			}
			h.AER = append(h.AER, counts...)
		}
		nic.Hops = append(nic.Hops, h)
	}
	if entries, err := os.ReadDir(filepath.Join(chain[0], "msi_irqs")); err == nil {
		for _, e := range entries {
			if n, err := strconv.ParseUint(e.Name(), 10, 32); err == nil {
				nic.MSIIRQs = append(nic.MSIIRQs, uint32(n))
			}
		}
	}
	if len(errs) > 0 {
		return nic, fmt.Errorf("%s: %v", nic.Address, errs)
	}
	return nic, nil
}

// hostBridge matches the directory of a PCI host bridge in sysfs
// (pci0000:3a): the root bus below it is segment 0000, bus 0x3a.
var hostBridge = regexp.MustCompile(`^pci([0-9a-f]{4}:[0-9a-f]{2})$`)

// RootBus is the root bus ("0000:3a") of the PCI hierarchy a network
// device's function sits in, as the uncore IIO PMUs' die<N> files name
// an IIO stack's. fs.ErrNotExist means the device has no PCI function.
func RootBus(sys, name string) (string, error) {
	real, err := filepath.EvalSymlinks(filepath.Join(sys, "class", "net", name, "device"))
	if err != nil {
		return "", err
	}
	for p := real; p != filepath.Dir(p); p = filepath.Dir(p) {
		if m := hostBridge.FindStringSubmatch(filepath.Base(p)); m != nil {
			return m[1], nil
		}
	}
	return "", fmt.Errorf("%s is not below a PCI host bridge: %w", real, os.ErrNotExist)
}

// readHop reads a function's link files; a function without a PCI
// Express capability has none, and its fields stay 0.
func readHop(dir string) (Hop, error) {
	h := Hop{Address: filepath.Base(dir)}
	for _, f := range []struct {
		file  string
		speed *float64
		width *int
	}{
		{"current_link_speed", &h.Speed, nil}, {"max_link_speed", &h.MaxSpeed, nil},
		{"current_link_width", nil, &h.Width}, {"max_link_width", nil, &h.MaxWidth},
	} {
		s, err := readTrimmed(filepath.Join(dir, f.file))
		if os.IsNotExist(err) {
			continue
		}
		if err != nil {
			return h, err
		}
		if f.speed != nil {
			v, ok := ParseLinkSpeed(s)
			if !ok {
				return h, fmt.Errorf("%s/%s: unexpected %q", h.Address, f.file, s)
			}
			*f.speed = v
			continue
		}
		// A link that is down reads 0; an unknown width is left out too.
		if v, err := strconv.Atoi(s); err == nil {
			*f.width = v
		}
	}
	return h, nil
}

// ParseLinkSpeed reads the kernel's pci_speed_string: "8.0 GT/s PCIe"
// (older kernels: "8 GT/s"), "Unknown" when the link is down or the
// speed is not one the kernel knows (0, true).
func ParseLinkSpeed(s string) (float64, bool) {
	if strings.HasPrefix(s, "Unknown") {
		return 0, true
	}
	num, unit, ok := strings.Cut(s, " ")
	if !ok || !strings.HasPrefix(unit, "GT/s") {
		return 0, false
	}
	v, err := strconv.ParseFloat(num, 64)
	if err != nil || v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return 0, false
	}
	return v, true
}

// LinkBandwidth is a link's theoretical bandwidth per direction in bytes
// per second: lanes x GT/s x the generation's encoding efficiency / 8.
func LinkBandwidth(gts float64, lanes int) float64 {
	var encoding float64
	switch {
	case gts <= 0 || lanes <= 0:
		return 0
	case gts <= 5: // Gen 1 and 2: 8b/10b
		encoding = 8.0 / 10
	case gts <= 32: // Gen 3 to 5: 128b/130b
		encoding = 128.0 / 130
	default: // Gen 6 FLIT mode: 256-byte flits, 14 bytes of CRC and FEC
		encoding = 242.0 / 256
	}
	// Values no kernel prints (a speed beyond float64's range once
	// multiplied) give no bandwidth rather than +Inf.
	if bw := gts * 1e9 * float64(lanes) * encoding / 8; !math.IsInf(bw, 0) {
		return bw
	}
	return 0
}

// readAER reads one aer_dev_* file.
func readAER(path, typ string) ([]AERCount, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	out, err := ParseAER(b, typ)
	if err != nil {
		return out, fmt.Errorf("%s: %w", path, err)
	}
	return out, nil
}

// ParseAER parses an aer_dev_* file: a line per error name with its
// count, and a TOTAL_ line that is the sum of the others (left out).
func ParseAER(b []byte, typ string) ([]AERCount, error) {
	var out []AERCount
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) != 2 || strings.HasPrefix(f[0], "TOTAL_") {
			continue
		}
		n, err := strconv.ParseUint(f[1], 10, 64)
		if err != nil {
			return out, fmt.Errorf("%q: %w", sc.Text(), err)
		}
		out = append(out, AERCount{Type: typ, Name: f[0], Count: n})
	}
	return out, sc.Err()
}

// NodeCPUs maps each CPU to its NUMA node.
type NodeCPUs struct {
	Node  map[int]int
	Count int // nodes with CPUs
}

// ReadNodeCPUs reads /sys/devices/system/node/nodeN/cpulist. A kernel
// without NUMA has no such directory: every CPU is then on node 0.
func ReadNodeCPUs(sys string) (NodeCPUs, error) {
	out := NodeCPUs{Node: map[int]int{}}
	dirs, err := filepath.Glob(filepath.Join(sys, "devices", "system", "node", "node[0-9]*"))
	if err != nil {
		return out, err
	}
	for _, d := range dirs {
		n, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(d), "node"))
		if err != nil {
			continue
		}
		cpus, err := cpulist.Read(filepath.Join(d, "cpulist"))
		if err != nil {
			return out, err
		}
		if len(cpus) > 0 {
			out.Count++
		}
		for _, c := range cpus {
			out.Node[c] = n
		}
	}
	return out, nil
}

// irqQueueNames are the names drivers give the MSI-X vector of RX queue
// N (the action's directory in /proc/irq/IRQ): virtio_net
// "virtio0-input.N", mlx5 "mlx5_compN@pci:ADDR", the Intel and Broadcom
// drivers' "IFNAME-TxRx-N" (i40e, ice, ixgbe, igb, bnxt), vmxnet3's
// "IFNAME-rxtx-N" (RX and TX sharing a vector, its default) or
// "IFNAME-rx-N" (drivers/net/vmxnet3/vmxnet3_drv.c), e1000e's
// "IFNAME-rx-0" (drivers/net/ethernet/intel/e1000e/netdev.c).
var irqQueueNames = []*regexp.Regexp{
	regexp.MustCompile(`^virtio\d+-input\.(\d+)$`),
	regexp.MustCompile(`^mlx5_comp(\d+)@`),
	regexp.MustCompile(`-(?:TxRx|rxtx|rx)-(\d+)$`),
}

// IRQQueue names the RX queue an IRQ serves from its action's name; the
// names after the interface must start with the device's own name.
func IRQQueue(procIRQ string, irq uint32, ifname string) (int, bool) {
	entries, err := os.ReadDir(filepath.Join(procIRQ, strconv.FormatUint(uint64(irq), 10)))
	if err != nil {
		return 0, false
	}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		for i, re := range irqQueueNames {
			m := re.FindStringSubmatch(e.Name())
			if m == nil || (i == 2 && !strings.HasPrefix(e.Name(), ifname+"-")) {
				continue
			}
			q, err := strconv.Atoi(m[1])
			return q, err == nil
		}
	}
	return 0, false
}

func readTrimmed(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// LinkDegraded compares the link of hops[i] (the NIC or a switch's
// upstream port) with the port above it, hops[i+1], which reports the
// same link from the other end: the link can do the lower of the two
// ends' maximum speed and width. known is false without link files.
func LinkDegraded(hops []Hop, i int) (degraded, known bool) {
	h := hops[i]
	if h.Speed == 0 || h.Width == 0 || h.MaxSpeed == 0 || h.MaxWidth == 0 {
		return false, false
	}
	capSpeed, capWidth := h.MaxSpeed, h.MaxWidth
	if i+1 < len(hops) {
		if p := hops[i+1]; p.MaxSpeed > 0 && p.MaxWidth > 0 {
			capSpeed, capWidth = min(capSpeed, p.MaxSpeed), min(capWidth, p.MaxWidth)
		}
	}
	return h.Speed < capSpeed || h.Width < capWidth, true
}

// QueueIRQ is an RX queue and the IRQ that serves it.
type QueueIRQ struct {
	Queue int
	IRQ   uint32
}

// RxQueueIRQs maps the RX queues of the NIC, device ifindex named ifname,
// to their IRQs: from known where the kernel links a queue to a NAPI with
// an IRQ (netdev.RxQueueIRQs), else from the names the driver gave its
// MSI-X vectors under procIRQ.
func RxQueueIRQs(procIRQ string, nic *NIC, ifindex uint32, ifname string, known map[netdev.QueueKey]uint32) []QueueIRQ {
	var out []QueueIRQ
	for k, irq := range known {
		if k.Ifindex == ifindex {
			out = append(out, QueueIRQ{Queue: int(k.Queue), IRQ: irq})
		}
	}
	if len(out) > 0 {
		return out
	}
	for _, irq := range nic.MSIIRQs {
		if q, ok := IRQQueue(procIRQ, irq, ifname); ok {
			out = append(out, QueueIRQ{Queue: q, IRQ: irq})
		}
	}
	return out
}

// ErrNoBus is a host without a PCI bus (a VM without one, a container
// without /sys): not supported here (errors.ErrUnsupported).
var ErrNoBus = fmt.Errorf("%w: no PCI bus in sysfs", errors.ErrUnsupported)

// CheckBus returns ErrNoBus, naming the path, where sysfs under sysRoot
// has no PCI bus.
func CheckBus(sysRoot string) error {
	path := filepath.Join(sysRoot, "bus", "pci")
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("%w (%s: %v)", ErrNoBus, path, err)
	}
	return nil
}
