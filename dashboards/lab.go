package dashboards

import (
	"fmt"
	"time"

	"github.com/prometheus/common/model"
)

// Series of the lab group (rules/lab.yml), named as the standard group's
// are, with the lab's window: the rxq program's packets by its verdict
// and read mode, the CPUs and queues that carry them, and each only at
// the steady points of a sweep.
func (r recorded) verdictRxq() string {
	return r.rate("instance_device_queue_cpu_action_read", "xdp_rxq_packets")
}
func (r recorded) actionRxq() string { return r.rate("instance_action_read", "xdp_rxq_packets") }
func (r recorded) actionCPUs() string {
	return "instance_action_read:xdp_rxq_cpus:count"
}
func (r recorded) actionQueues() string {
	return "instance_action_read:xdp_rxq_queues:count"
}
func (r recorded) actionSteady() string { return r.actionRxq() + "_steady" }
func (r recorded) steadyCPUs() string   { return "instance_action_read:xdp_rxq_cpus:steady_count" }
func (r recorded) steadyQueues() string { return "instance_action_read:xdp_rxq_queues:steady_count" }
func (r recorded) stackCPUs() string    { return "instance:xdp_softnet_cpus:count" }
func (r recorded) stackRate() string    { return r.rate("instance", "xdp_napi_packets") }
func (r recorded) stackSteadyCPUs() string {
	return "instance:xdp_softnet_cpus:steady_count"
}
func (r recorded) stackSteadyRate() string { return r.stackRate() + "_steady" }
func (r recorded) offered() string         { return r.rate("instance", "xdp_offered_packets") }
func (r recorded) rxqCPUsBusy() string {
	return "instance:xdp_rxq_cpus_busy:avg_ratio_rate" + r.w
}
func (r recorded) rxqCacheMiss() string {
	return "instance:xdp_rxq_cpus_cache_miss:max_ratio_rate" + r.w + "_steady"
}
func (r recorded) changedStats() string {
	return r.rate("instance_device_stat", "xdp_nic_stats") + "_changed"
}

// LabRecordingRules returns the group the paper figures and the run
// view's table of changed driver stats read: evaluated every
// cfg.Lab.Interval over cfg.Lab.RateWindow. Load it in the Prometheus of
// a lab run; a fleet's Prometheus has no use for it.
func LabRecordingRules(cfg Config) RuleFile {
	lc := cfg.Lab
	r := recorded{lc.RateWindow}
	h, sel := cfg.hostLabels(), cfg.Selector
	rec, sumRate := record, sumRater(sel, lc.RateWindow)
	active := " > " + num(lc.MinPackets)
	ha := h + ", action, read"
	// A sweep stands still when the rate moved by at most the tolerance
	// since a window earlier and the counts equal theirs then: one step of
	// a sweep, not the ramp between steps (nor a new exporter's first
	// windows, whose window-earlier counts are the previous run's).
	before := func(series string) string { return series + " offset " + lc.RateWindow }
	steady := func(rate, on string, counts ...string) string {
		e := rate + "\nand on (" + on + ")\nabs(" + rate + " - " + before(rate) + ") <= " +
			num(lc.SteadyTolerance) + " * " + before(rate)
		for _, c := range counts {
			e += "\nand on (" + on + ")\n(" + c + " == " + before(c) + ")"
		}
		return e
	}
	at := func(series, steadyRate, on string) string { return series + " and on (" + on + ") " + steadyRate }
	// The RX CPUs of the figures are the CPUs the rxq program counts
	// packets on.
	rxqCPUs := "(" + sumRate(h+", cpu", "xdp_rxq_packets_total") + active + ")"
	perCPU := func(num, den string) string {
		return sumRate(h+", cpu", num) + "\n  /\n  " + sumRate(h+", cpu", den)
	}
	return RuleFile{Groups: []RuleGroup{{Name: "xdp_exporter.lab", Interval: lc.Interval, Rules: []Rule{
		// The rxq program's packets by verdict, with the read mode of the
		// program that counted them (xdp_rxq_info, attach mode: observe
		// mode counts programs whose cost the lab does not set).
		rec(r.verdictRxq(), sumRate(h+", device, queue, cpu, action", "xdp_rxq_packets_total")+
			"\n* on ("+h+", device, action) group_left (read)\ngroup by ("+h+", device, action, read) ("+withSelector("xdp_rxq_info", sel)+")"),
		rec(r.actionRxq(), "sum by ("+ha+") ("+r.verdictRxq()+")"),
		rec(r.actionCPUs(), "count by ("+ha+") (sum by ("+ha+", cpu) ("+r.verdictRxq()+")"+active+")"),
		rec(r.actionQueues(), "count by ("+ha+") (sum by ("+ha+", device, queue) ("+r.verdictRxq()+")"+active+")"),
		rec(r.actionSteady(), steady(r.actionRxq(), ha, r.actionCPUs(), r.actionQueues())),
		rec(r.steadyCPUs(), at(r.actionCPUs(), r.actionSteady(), ha)),
		rec(r.steadyQueues(), at(r.actionQueues(), r.actionSteady(), ha)),
		// Linux without XDP: the CPUs whose softnet processes packets and
		// the packets NAPI delivered, on hosts with no rxq program.
		rec(r.stackCPUs(), "count by ("+h+") ("+sumRate(h+", cpu", "xdp_cpu_softnet_processed_total")+active+")"),
		rec(r.stackRate(), sumRate(h, "xdp_napi_poll_work_sum")),
		rec(r.stackSteadyRate(), steady(r.stackRate(), h, r.stackCPUs())+"\nunless on ("+h+")\n"+withSelector("xdp_rxq_info", sel)),
		rec(r.stackSteadyCPUs(), at(r.stackCPUs(), r.stackSteadyRate(), h)),
		// Offered load: the port's received packets (xdp_nic_port_packets_total,
		// from each device's one source) or, without a physical port, the
		// packets the rxq program saw.
		rec(r.offered(), sumRate(h, `xdp_nic_port_packets_total{direction="rx"}`)+"\nor\n"+sumRate(h, "xdp_rxq_packets_total")),
		rec(r.rxqCPUsBusy(), "1 - avg by ("+h+") (\n  "+perCPU(`xdp_cpu_seconds_total{mode="idle"}`, "xdp_cpu_seconds_total")+
			"\n  and on ("+h+", cpu)\n  "+rxqCPUs+"\n)"),
		// The worst RX CPU's cache-miss ratio at the steady points of an
		// RX-queue sweep.
		rec(r.rxqCacheMiss(), "max by ("+h+") (\n  "+perCPU("xdp_perf_cache_misses_total", "xdp_perf_cache_references_total")+
			"\n  and on ("+h+", cpu)\n  "+rxqCPUs+"\n)\nand on ("+h+")\ngroup by ("+h+") ("+r.actionSteady()+")"),
		// ethtool_stats.pl: every driver counter that moved, per second,
		// with its family in a stat label (rate() would drop the name).
		rec(r.changedStats(), changedStats(withSelector(`{__name__=~"xdp_nic_.+_total|xdp_nic_(queue_)?stat_.+"}`, sel), lc.RateWindow)),
	}}}}
}

// changedStats is every counter of sel that moved over window, per
// second, with its family name without xdp_nic_ in a stat label; the
// increase is taken by hand so the name survives, and a counter reset
// (a negative change) is left out with the unchanged ones.
func changedStats(sel, window string) string {
	named := func(v string) string { return `label_replace(` + v + `, "stat", "$1", "__name__", "xdp_nic_(.+)")` }
	return "(\n  " + named(sel) + "\n  -\n  " + named(sel+" offset "+window) + "\n) / " + secondsOf(window) + " > 0"
}

// secondsOf is a Prometheus duration in seconds, as PromQL reads a number.
func secondsOf(d string) string {
	v, err := model.ParseDuration(d)
	if err != nil {
		panic(fmt.Sprintf("dashboards: rate window %q: %v", d, err))
	}
	return num(time.Duration(v).Seconds())
}
