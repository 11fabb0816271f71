package collector

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/cilium/ebpf"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/xdpdispatch"
)

var bpfDispatcherComponent = newFamily("bpf", "bpf_dispatcher_component_info",
	"A program in a slot of libxdp's multi-program dispatcher on a device; always 1.",
	Gauge, "device", "attach_mode", "dispatcher_id", "slot", "prog_id", "name", "tag", "priority", "chain_call_actions", "link_id").documented("A program inside libxdp's multi-program dispatcher (xdp-loader, AF_XDP's default program) on a device: " +
	"slot the dispatcher calls it in (from 0), priority libxdp ordered it by, chain_call_actions the verdicts with which the packet " +
	"goes on to the next slot (any other verdict is the device's), link_id the freplace bpf_link holding it. " +
	"The kernel counts run count and run time only for the dispatcher (xdp_bpf_prog_info). Always 1.").experimental()

// sendComponents lists the components of the dispatcher at a. A
// dispatcher replaced since the listing has none.
func (c *bpfCollector) sendComponents(ch chan<- prometheus.Metric, a xdpAttachment) error {
	prog, err := ebpf.NewProgramFromID(a.progID)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("dispatcher %d on %s: %w", a.progID, a.device, bpfDenied("bpf", needsAdmin, err))
	}
	defer prog.Close()
	d, err := xdpdispatch.Read(prog, uint32(a.ifindex), filepath.Join(c.cfg.SysFS, "fs/bpf"))
	if err != nil || d == nil {
		return bpfDenied("bpf", needsAdmin, err)
	}
	for _, comp := range d.Components {
		p, err := c.progs.Read(comp.Prog)
		if err != nil {
			return fmt.Errorf("component %d of dispatcher %d on %s: %w", comp.Prog, a.progID, a.device, bpfDenied("bpf", needsAdmin, err))
		}
		if p == nil {
			continue
		}
		linkID := ""
		if comp.Link != 0 {
			linkID = strconv.FormatUint(uint64(comp.Link), 10)
		}
		c.cfg.Families.send(ch, bpfDispatcherComponent, 1, a.device, a.mode, progIDLabel(a.progID), strconv.Itoa(comp.Slot),
			progIDLabel(comp.Prog), p.Name, p.Tag, strconv.FormatUint(uint64(comp.Priority), 10), comp.ChainCallNames(), linkID)
	}
	return nil
}
