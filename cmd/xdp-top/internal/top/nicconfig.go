package top

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// minFrameWireBytes is a 64-byte frame on the wire with its preamble and
// inter-frame gap: the link's line rate in packets is its speed over it.
const minFrameWireBytes = 84

// config is one line per device with the configuration behind its
// queues: link speed and the port's share of its 64-byte line rate,
// interrupt coalescing, pause settings and frames, the RSS table's
// weights, and the RX queues' interrupts and packets per interrupt.
func (v viewCtx) config() []string {
	parts := map[string][]string{}
	add := func(dev, s string) { parts[dev] = append(parts[dev], s) }
	gauge := func(family string) map[string][]Series {
		out := map[string][]Series{}
		for _, s := range v.cur.Values(family) {
			if v.selects(s) {
				out[s.Get("device")] = append(out[s.Get("device")], s)
			}
		}
		return out
	}
	perDevice := func(family string, match func(Series) bool) map[string]float64 {
		out := map[string]float64{}
		for _, s := range v.rates(family) {
			if match == nil || match(s) {
				out[s.Get("device")] += s.Value
			}
		}
		return out
	}

	port := perDevice("xdp_nic_port_packets_total", func(s Series) bool { return s.Get("direction") == "rx" })
	for dev, ss := range gauge("xdp_nic_link_speed_bytes_per_second") {
		line := fmt.Sprintf("link %.0f Gbit/s", ss[0].Value*8/1e9)
		if p, ok := port[dev]; ok && ss[0].Value > 0 {
			line += fmt.Sprintf(" (port rx %.1f%% of 64-byte line rate)", 100*p/(ss[0].Value/minFrameWireBytes))
		}
		add(dev, line)
	}
	for dev, line := range coalescing(gauge) {
		add(dev, line)
	}
	pauseFrames := map[string]map[string]float64{}
	for _, s := range v.rates("xdp_nic_pause_frames_total") {
		if pauseFrames[s.Get("device")] == nil {
			pauseFrames[s.Get("device")] = map[string]float64{}
		}
		pauseFrames[s.Get("device")][s.Get("direction")] = s.Value
	}
	for dev, ss := range gauge("xdp_nic_pause_enabled") {
		on := map[string]string{}
		for _, s := range ss {
			on[s.Get("direction")] = map[bool]string{true: "on", false: "off"}[s.Value == 1]
		}
		line := fmt.Sprintf("pause rx %s tx %s", on["rx"], on["tx"])
		if f, ok := pauseFrames[dev]; ok {
			line += fmt.Sprintf(" (frames rx %s/s, tx %s/s)", pps(f["rx"]), pps(f["tx"]))
		}
		add(dev, line)
	}
	for dev, line := range v.rssWeights(gauge) {
		add(dev, line)
	}
	for dev, line := range v.queueInterrupts() {
		add(dev, line)
	}

	out := make([]string, 0, len(parts))
	for _, dev := range slices.Sorted(maps.Keys(parts)) {
		out = append(out, dev+": "+strings.Join(parts[dev], "; "))
	}
	return out
}

// coalescing is per device its interrupt coalescing per direction.
func coalescing(gauge func(string) map[string][]Series) map[string]string {
	out, coalesce := map[string]string{}, map[string]map[string]float64{}
	for _, family := range []string{"xdp_nic_coalesce_delay_seconds", "xdp_nic_coalesce_max_frames", "xdp_nic_coalesce_adaptive"} {
		for dev, ss := range gauge(family) {
			for _, s := range ss {
				if coalesce[dev] == nil {
					coalesce[dev] = map[string]float64{}
				}
				coalesce[dev][family+" "+s.Get("direction")] = s.Value
			}
		}
	}
	for dev, c := range coalesce {
		var dirs []string
		for _, dir := range []string{"rx", "tx"} {
			d := fmt.Sprintf("%s %.0fus/%.0f frames", dir, c["xdp_nic_coalesce_delay_seconds "+dir]*1e6, c["xdp_nic_coalesce_max_frames "+dir])
			if c["xdp_nic_coalesce_adaptive "+dir] == 1 {
				d += " adaptive"
			}
			dirs = append(dirs, d)
		}
		out[dev] = "coalesce " + strings.Join(dirs, ", ")
	}
	return out
}

// rssWeights is per device its RSS hash function and the least and most
// entries an RX queue has in the indirection table, over an even share.
func (v viewCtx) rssWeights(gauge func(string) map[string][]Series) map[string]string {
	out := map[string]string{}
	queues := map[string]float64{}
	for dev, ss := range gauge("xdp_nic_channels") {
		for _, s := range ss {
			if t := s.Get("channel"); t == "rx" || t == "combined" {
				queues[dev] += s.Value
			}
		}
	}
	hash := map[string]string{}
	for dev, ss := range gauge("xdp_nic_rss_info") {
		hash[dev] = ss[0].Get("hash_function")
	}
	for dev, ss := range gauge("xdp_nic_rss_indirection_entries") {
		total, lo, hi := 0.0, ss[0].Value, ss[0].Value
		for _, s := range ss {
			total += s.Value
			lo, hi = min(lo, s.Value), max(hi, s.Value)
		}
		n := max(queues[dev], float64(len(ss)))
		if float64(len(ss)) < n {
			lo = 0 // a queue without an entry
		}
		even := total / n
		out[dev] = fmt.Sprintf("RSS %s %.0f entries, queue weight %.2f-%.2f", strings.TrimSpace(hash[dev]), total, lo/even, hi/even)
	}
	return out
}

// queueInterrupts is per device its RX queues' interrupts per second and
// the packets per interrupt of the queues the kernel counts (netdev
// qstats per queue, else the driver's per-queue counter).
func (v viewCtx) queueInterrupts() map[string]string {
	irqs, packets := map[string]float64{}, map[string]float64{}
	for _, s := range v.rates("xdp_pcie_rx_queue_interrupts_total") {
		irqs[s.Get("device")] += s.Value
	}
	for _, family := range []string{"xdp_netdev_queue_rx_packets_total", "xdp_nic_rx_queue_packets_total"} {
		counted := map[string]float64{}
		for _, s := range v.rates(family) {
			if s.Get("queue") != "" {
				counted[s.Get("device")] += s.Value
			}
		}
		for dev, n := range counted {
			if _, done := packets[dev]; !done {
				packets[dev] = n
			}
		}
	}
	out := map[string]string{}
	for dev, n := range irqs {
		line := fmt.Sprintf("RX queue interrupts %s/s", pps(n))
		if packets[dev] > 0 && n > 0 {
			line += fmt.Sprintf(", %.1f packets per interrupt", packets[dev]/n)
		}
		out[dev] = line
	}
	return out
}
