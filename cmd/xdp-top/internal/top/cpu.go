package top

import (
	"sort"
	"strconv"
)

// cpu is mpstat's columns per CPU, softnet drops and squeezes, and perf
// stat's IPC and cache-miss ratio where the perf collector runs.
func (v viewCtx) cpu() string {
	if !v.cur.Has("xdp_cpu_seconds_total") {
		return needs("cpu", "xdp_cpu_seconds_total")
	}
	modes := map[string]map[string]float64{}
	for _, s := range Rates(v.prev, v.cur, "xdp_cpu_seconds_total") {
		c := s.Labels["cpu"]
		if modes[c] == nil {
			modes[c] = map[string]float64{}
		}
		modes[c][s.Labels["mode"]] += s.Value
	}
	cpus := make([]string, 0, len(modes))
	for c := range modes {
		cpus = append(cpus, c)
	}
	sort.Slice(cpus, func(i, j int) bool { return lessKey(cpus[i], cpus[j]) })
	per := func(family string) map[string]float64 {
		out := map[string]float64{}
		for _, s := range Rates(v.prev, v.cur, family) {
			out[s.Labels["cpu"]] += s.Value
		}
		return out
	}
	drops, squeezed := per("xdp_cpu_softnet_dropped_total"), per("xdp_cpu_softnet_times_squeezed_total")
	instr, cycles := per("xdp_perf_instructions_total"), per("xdp_perf_cycles_total")
	misses, refs := per("xdp_perf_cache_misses_total"), per("xdp_perf_cache_references_total")
	perf := v.cur.Has("xdp_perf_cycles_total")
	t := newTable()
	head := []string{"CPU", "%usr", "%sys", "%irq", "%soft", "%idle", "drops/s", "squeezed/s"}
	if perf {
		head = append(head, "IPC", "cache-miss%")
	}
	t.row(head...)
	for _, c := range cpus {
		m := modes[c]
		var total float64
		for _, x := range m {
			total += x
		}
		if total == 0 {
			continue
		}
		pct := func(x float64) string { return strconv.FormatFloat(100*x/total, 'f', 1, 64) }
		row := []string{c, pct(m["user"] + m["nice"]), pct(m["system"]), pct(m["irq"]), pct(m["softirq"]), pct(m["idle"] + m["iowait"]),
			pps(drops[c]), pps(squeezed[c])}
		if perf {
			ipc, miss := "-", "-"
			if cycles[c] > 0 {
				ipc = strconv.FormatFloat(instr[c]/cycles[c], 'f', 2, 64)
			}
			if refs[c] > 0 {
				miss = strconv.FormatFloat(100*misses[c]/refs[c], 'f', 1, 64)
			}
			row = append(row, ipc, miss)
		}
		t.row(row...)
	}
	if !perf {
		t.row("(IPC and cache misses need --collector.perf)")
	}
	return t.String()
}
