package top

import (
	"fmt"
	"sort"

	dto "github.com/prometheus/client_model/go"
)

// uncore is one line per device behind a measured IIO stack: the root
// complex's bytes per second up (the devices' writes to memory, the
// CPUs' MMIO read completions) and down (the devices' reads, the CPUs'
// MMIO writes), and the DDIO miss share of the device writes on its
// socket: what perf iostat and pcm-pcie print, beside the NIC's stats.
func (v viewCtx) uncore() []string {
	type stack struct{ socket, iio string }
	bytes := map[stack]*[2]float64{} // up, down
	each(v.prev, v.cur, "xdp_uncore_iio_bytes_total", func(m *dto.Metric, rate float64) {
		k := stack{label(m, "socket"), label(m, "iio")}
		if bytes[k] == nil {
			bytes[k] = &[2]float64{}
		}
		dir, op := label(m, "transaction"), label(m, "op")
		if (dir == "inbound") == (op == "write") {
			bytes[k][0] += rate
		} else {
			bytes[k][1] += rate
		}
	})
	writes := map[string]*[2]float64{} // socket: hit, miss
	each(v.prev, v.cur, "xdp_uncore_ddio_requests_total", func(m *dto.Metric, rate float64) {
		if r := label(m, "request"); r != "itom" && r != "itomcachenear" {
			return
		}
		s := label(m, "socket")
		if writes[s] == nil {
			writes[s] = &[2]float64{}
		}
		writes[s][map[string]int{"hit": 0, "miss": 1}[label(m, "result")]] += rate
	})
	var out []string
	for _, s := range v.cur.Values("xdp_uncore_iio_device_info") {
		b := bytes[stack{s.Labels["socket"], s.Labels["iio"]}]
		if !v.selects(s) || b == nil {
			continue
		}
		line := fmt.Sprintf("%s: root complex %s (socket %s) up %.1f MB/s, down %.1f MB/s measured", s.Labels["device"], s.Labels["root_bus"], s.Labels["socket"], b[0]/1e6, b[1]/1e6)
		// Misses alone (Skylake-SP, Cascade Lake) make no share.
		if w := writes[s.Labels["socket"]]; w != nil && w[0] > 0 {
			line += fmt.Sprintf("; DDIO write misses %.1f%%", 100*w[1]/(w[0]+w[1]))
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}
