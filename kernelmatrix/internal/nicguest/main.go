// Command nicguest is the guest half of kernelmatrix.TestEmulatedNICs:
// inside a QEMU guest with emulated NICs (e1000e, vmxnet3, rtl8139), each
// on a hub of its own with a virtio-net NIC that feeds it, it shrinks the
// NIC's RX ring, starts the exporter (the vmxnet3 NIC under the rxq
// collector), floods each NIC from its feeder as fast as AF_PACKET sends,
// and writes to OUTDIR, once the counters settle, a scrape and the driver's
// own view: ethtool -i and -S, the configuration's ethtool views (link,
// -c, -a, -x, -n), ip -s link, /proc/interrupts before and after the
// scrape and the RX IRQs' effective affinity. The test on the host
// compares them.
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/emunic"
	"github.com/xdp-exporter/xdp_exporter/kernelmatrix/internal/guest"
)

func main() {
	guest.Main("nicguest", func(exporter, out string, _ []string) error {
		return run(exporter, out, slices.Clone(emunic.NICs), emunic.Frames)
	})
}

const addr = "127.0.0.1:19740"

func run(exporter, out string, nics []emunic.NIC, frames uint64) error {
	// No IPv6: router solicitations and DAD frames would add to the
	// exact counts.
	for _, k := range []string{"all", "default"} {
		if err := os.WriteFile("/proc/sys/net/ipv6/conf/"+k+"/disable_ipv6", []byte("1"), 0o644); err != nil {
			return err
		}
	}
	for i := range nics {
		if err := setUp(&nics[i]); err != nil {
			return err
		}
	}
	var args []string
	for _, n := range nics {
		if n.Driver == "vmxnet3" {
			args = append(args, "--collector.rxq", "--collector.rxq.device="+n.Dev, "--collector.rxq.action=drop")
		}
	}
	e, err := guest.StartExporter(exporter, addr, args...)
	if err != nil {
		return err
	}
	defer e.Stop()
	for i := range nics {
		if err := flood(&nics[i], frames); err != nil {
			return err
		}
	}
	if err := settle(nics); err != nil {
		return err
	}
	if err := record(e, out, nics); err != nil {
		return err
	}
	b, err := json.MarshalIndent(nics, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(out, "nics.json"), b, 0o644)
}

// setUp finds the NIC and its feeder by MAC, brings both up and sets the
// NIC's RX ring.
func setUp(n *emunic.NIC) error {
	var err error
	if n.Dev, err = byMAC(n.MAC); err != nil {
		return err
	}
	if n.Feeder, err = byMAC(n.FeederMAC); err != nil {
		return err
	}
	for _, dev := range []string{n.Dev, n.Feeder} {
		if err := sh("ip", "link", "set", dev, "up"); err != nil {
			return err
		}
	}
	if n.RxRing > 0 {
		return sh("ethtool", "-G", n.Dev, "rx", fmt.Sprint(n.RxRing))
	}
	return nil
}

func byMAC(mac string) (string, error) {
	deadline := time.Now().Add(30 * time.Second)
	for {
		ifs, err := net.Interfaces()
		if err != nil {
			return "", err
		}
		for _, i := range ifs {
			if strings.EqualFold(i.HardwareAddr.String(), mac) {
				return i.Name, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("no interface has MAC %s (is its driver's module loaded?)", mac)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func sh(args ...string) error {
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		return fmt.Errorf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// flood sends frames from the feeder to the NIC as fast as AF_PACKET
// goes: faster than the guest drains a small ring.
func flood(n *emunic.NIC, frames uint64) error {
	if err := guest.Send(n.Feeder, n.Dev, frames, 0); err != nil {
		return err
	}
	n.Sent = frames
	return nil
}

// settle waits until no NIC's counters move: `ip -s link` the same twice
// half a second apart.
func settle(nics []emunic.NIC) error {
	snapshot := func() (string, error) {
		var b strings.Builder
		for _, n := range nics {
			out, err := exec.Command("ip", "-s", "-s", "link", "show", "dev", n.Dev).Output()
			if err != nil {
				return "", err
			}
			b.Write(out)
		}
		return b.String(), nil
	}
	prev, err := snapshot()
	for deadline := time.Now().Add(60 * time.Second); err == nil && time.Now().Before(deadline); {
		time.Sleep(500 * time.Millisecond)
		var cur string
		if cur, err = snapshot(); err == nil && cur == prev {
			return nil
		}
		prev = cur
	}
	if err != nil {
		return err
	}
	return fmt.Errorf("the NICs' counters did not settle in 60 s")
}

// record writes the scrape between two copies of /proc/interrupts, and
// for each NIC its driver's ethtool -i and -S, its configuration as
// ethtool shows it (a call the driver refuses leaves NAME.refused with
// ethtool's message), ip -s -s link as JSON, and /proc/interrupts with the
// effective affinity of every IRQ named after the NIC.
func record(e *guest.Exporter, out string, nics []emunic.NIC) error {
	if err := copyFile("/proc/interrupts", filepath.Join(out, "interrupts-before.txt")); err != nil {
		return err
	}
	body, err := e.Scrape()
	if err != nil {
		return err
	}
	if err := copyFile("/proc/interrupts", filepath.Join(out, "interrupts-after.txt")); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(out, "scrape.prom"), body, 0o644); err != nil {
		return err
	}
	for _, n := range nics {
		for suffix, args := range map[string][]string{
			".ethtool-i": {"ethtool", "-i", n.Dev}, ".ethtool-S": {"ethtool", "-S", n.Dev},
			".ip.json": {"ip", "-j", "-s", "-s", "link", "show", "dev", n.Dev},
		} {
			b, err := exec.Command(args[0], args[1:]...).Output()
			if err != nil {
				return fmt.Errorf("%s: %v", strings.Join(args, " "), err)
			}
			if err := os.WriteFile(filepath.Join(out, n.Driver+suffix), b, 0o644); err != nil {
				return err
			}
		}
		if err := recordConfig(out, n); err != nil {
			return err
		}
	}
	return recordIRQs(out, nics)
}

// configCommands are the ethtool views of a NIC's configuration the
// exporter reads, by file suffix.
var configCommands = map[string][]string{
	".ethtool": nil, ".ethtool-c": {"-c"}, ".ethtool-a": {"-I", "-a"}, ".ethtool-x": {"-x"}, ".ethtool-n": {"-n"},
	".ethtool-n-tcp4": {"-n", "", "rx-flow-hash", "tcp4"}, ".ethtool-n-udp4": {"-n", "", "rx-flow-hash", "udp4"},
	".ethtool-n-tcp6": {"-n", "", "rx-flow-hash", "tcp6"}, ".ethtool-n-udp6": {"-n", "", "rx-flow-hash", "udp6"},
}

func recordConfig(out string, n emunic.NIC) error {
	for suffix, opts := range configCommands {
		args := slices.Clone(opts)
		if i := slices.Index(args, ""); i >= 0 {
			args[i] = n.Dev
		} else {
			args = append(args, n.Dev)
		}
		path := filepath.Join(out, n.Driver+suffix)
		b, err := exec.Command("ethtool", args...).CombinedOutput()
		if err != nil {
			path += ".refused"
		}
		if err := os.WriteFile(path, b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(from, to string) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	return os.WriteFile(to, b, 0o644)
}

// recordIRQs writes irqs.txt: each line of /proc/interrupts that names
// a NIC under test, then its effective affinity list.
func recordIRQs(out string, nics []emunic.NIC) error {
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		return err
	}
	var w strings.Builder
	for _, line := range strings.Split(string(b), "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		for _, n := range nics {
			if !strings.Contains(line, " "+n.Dev) {
				continue
			}
			irq := strings.TrimSuffix(fields[0], ":")
			aff, err := os.ReadFile("/proc/irq/" + irq + "/effective_affinity_list")
			if err != nil {
				return err
			}
			fmt.Fprintf(&w, "%s %s %s\n", irq, fields[len(fields)-1], strings.TrimSpace(string(aff)))
		}
	}
	return os.WriteFile(filepath.Join(out, "irqs.txt"), []byte(w.String()), 0o644)
}
