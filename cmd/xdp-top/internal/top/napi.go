package top

import (
	"fmt"
	"math"
	"sort"
	"strings"
)

// napi is napi_monitor's view: the bulk histogram per device and context.
func (v viewCtx) napi() string {
	if !v.cur.Has("xdp_napi_poll_work") {
		return needs("napi", "xdp_napi_poll_work")
	}
	hs := HistogramRates(v.prev, v.cur, "xdp_napi_poll_work")
	sort.Slice(hs, func(i, j int) bool {
		a, b := hs[i].Labels, hs[j].Labels
		return a["device"]+a["context"] < b["device"]+b["context"]
	})
	exhausted := v.rates("xdp_napi_polls_budget_exhausted_total")
	var out strings.Builder
	for _, h := range hs {
		if !v.selects(Series{Labels: h.Labels}) || h.Count == 0 {
			continue
		}
		avg := h.SumRate / h.Count
		fmt.Fprintf(&out, "NAPI %s (%s): %s polls/s, %s pkts/s, average bulk %.1f, budget exhausted %.1f%%\n",
			h.Labels["device"], h.Labels["context"], pps(h.Count), pps(h.SumRate), avg,
			100*lookup(exhausted, h.Labels)/h.Count)
		peak := 0.0
		for _, p := range h.PerSec {
			peak = max(peak, p)
		}
		for i, p := range h.PerSec {
			if p == 0 {
				continue
			}
			bucket := "  >64"
			if !math.IsInf(h.Uppers[i], 1) {
				bucket = fmt.Sprintf("%5.0f", h.Uppers[i])
			}
			bar := strings.Repeat("#", int(math.Round(30*p/peak)))
			fmt.Fprintf(&out, "  bulk[%s] %10s polls/s %-30s\n", bucket, pps(p), bar)
		}
	}
	split := map[string]float64{}
	var total float64
	for _, h := range hs {
		split[h.Labels["context"]] += h.Count
		total += h.Count
	}
	if total > 0 {
		var parts []string
		for _, c := range []string{"idle", "ksoftirqd", "threaded", "other"} {
			parts = append(parts, fmt.Sprintf("%s %.1f%%", c, 100*split[c]/total))
		}
		fmt.Fprintf(&out, "polls by context: %s\n", strings.Join(parts, ", "))
	}
	if out.Len() == 0 {
		return "no NAPI polls in this interval\n"
	}
	return out.String()
}
