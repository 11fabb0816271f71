package dashboards

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// RuleFile is a Prometheus rule file.
type RuleFile struct {
	Groups []RuleGroup `yaml:"groups"`
}

// RuleGroup is one group of a rule file.
type RuleGroup struct {
	Name string `yaml:"name"`
	// Interval overrides Prometheus' evaluation_interval for the group.
	Interval string `yaml:"interval,omitempty"`
	Rules    []Rule `yaml:"rules"`
}

// Rule is a recording rule (Record set) or an alerting rule (Alert set).
type Rule struct {
	Record string `yaml:"record,omitempty"`
	Alert  string `yaml:"alert,omitempty"`
	Expr   string `yaml:"expr"`
	For    string `yaml:"for,omitempty"`
	// KeepFiringFor keeps an alert firing that long after its condition
	// ended (Prometheus 2.42+).
	KeepFiringFor string            `yaml:"keep_firing_for,omitempty"`
	Labels        map[string]string `yaml:"labels,omitempty"`
	Annotations   map[string]string `yaml:"annotations,omitempty"`
}

// num renders a threshold the way PromQL reads it.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

// recorded names the recording rules by the rate window, following the
// level:metric:operations convention (instance_cpu:xdp_rxq_packets:rate1m).
type recorded struct{ w string }

func (r recorded) rate(level, metric string) string { return level + ":" + metric + ":rate" + r.w }
func (r recorded) ratio(level, metric string) string {
	return level + ":" + metric + ":ratio_rate" + r.w
}

// Names of recorded series used by the alerts and the fleet dashboard.

// progRunTime is each program's seconds per run (XDP, tc, tcx, netkit).
func (r recorded) progRunTime() string {
	return r.ratio("instance_prog", "xdp_bpf_prog_run_seconds_per_run")
}
func (r recorded) cpuRxq() string   { return r.rate("instance_cpu", "xdp_rxq_packets") }
func (r recorded) queueRxq() string { return r.rate("instance_device_queue", "xdp_rxq_packets") }
func (r recorded) queueCPURxq() string {
	return r.rate("instance_device_queue_cpu", "xdp_rxq_packets")
}
func (r recorded) deviceRxq() string { return r.rate("instance_device", "xdp_rxq_packets") }

// rxQueue is the packets each RX queue received, from the best source a
// device has, named in its source label.
func (r recorded) rxQueue() string { return r.rate("instance_device_queue", "xdp_rx_queue_packets") }
func (r recorded) hostXDP() string { return r.rate("instance", "xdp_processed_packets") }

// hostVerdicts is the rxq collector's packets per host and verdict: in
// observe mode, the verdicts of the programs the host runs.
func (r recorded) hostVerdicts() string { return r.rate("instance_action", "xdp_rxq_packets") }
func (r recorded) deviceXDP() string {
	return r.rate("instance_device", "xdp_processed_packets")
}
func (r recorded) cpuMode() string { return r.ratio("instance_cpu_mode", "xdp_cpu_seconds") }
func (r recorded) rxCPUMode() string {
	return r.ratio("instance_cpu_mode", "xdp_rx_cpu_seconds")
}
func (r recorded) queueCPUIRQ() string {
	return r.rate("instance_device_queue_cpu_irq", "xdp_rxq_packets")
}
func (r recorded) cqePackets() string {
	return r.rate("instance_device", "xdp_nic_rx_cqe_compressed_packets")
}
func (r recorded) cqeBlocks() string {
	return r.rate("instance_device", "xdp_nic_rx_cqe_compressed_blocks")
}
func (r recorded) rxCPU() string     { return "instance_cpu:xdp_rx_cpu:active" }
func (r recorded) rxIdle() string    { return "instance:xdp_rx_cpus_idle:avg_ratio" }
func (r recorded) rxSoftirq() string { return "instance:xdp_rx_cpus_softirq:avg_ratio" }
func (r recorded) rxCPUs() string    { return "instance:xdp_rx_cpus:count" }
func (r recorded) rxImbalance() string {
	return "instance_device:xdp_rx_queue_packets:max_over_mean"
}

// portRx is the packets each device's port received, and hostDrops the
// packets it dropped for lack of host resources, by where: each from its
// device's one source (collector/nic.go), which
// xdp_nic_signal_source_info names.
func (r recorded) portRx() string { return r.rate("instance_device", "xdp_nic_port_rx_packets") }
func (r recorded) hostDrops() string {
	return r.rate("instance_device", "xdp_nic_rx_host_drops")
}
func (r recorded) allocFailures() string {
	return r.rate("instance_device", "xdp_nic_rx_alloc_failures")
}
func (r recorded) pageCache() string {
	return r.rate("instance_device_event", "xdp_nic_rx_page_cache_events")
}
func (r recorded) pagePool() string {
	return r.rate("instance_device_path", "xdp_nic_rx_page_pool_allocations")
}
func (r recorded) xdpActions() string {
	return r.rate("instance_device_action", "xdp_nic_rx_xdp_packets")
}
func (r recorded) cacheMiss() string   { return r.ratio("instance_cpu", "xdp_perf_cache_miss") }
func (r recorded) cacheRefs() string   { return r.rate("instance_cpu", "xdp_perf_cache_references") }
func (r recorded) ipc() string         { return r.ratio("instance_cpu", "xdp_perf_ipc") }
func (r recorded) napiPolls() string   { return r.rate("instance_device_context", "xdp_napi_polls") }
func (r recorded) napiPackets() string { return r.rate("instance_device_context", "xdp_napi_packets") }
func (r recorded) napiExhausted() string {
	return r.rate("instance_device_context", "xdp_napi_polls_budget_exhausted")
}
func (r recorded) deviceRx() string     { return r.rate("instance_device", "xdp_device_rx_packets") }
func (r recorded) exceptions() string   { return r.rate("instance_device", "xdp_exceptions") }
func (r recorded) redirectErrs() string { return r.rate("instance_device", "xdp_redirect_errors") }
func (r recorded) hostPortRx() string   { return r.rate("instance", "xdp_nic_port_rx_packets") }
func (r recorded) hostHostDrops() string {
	return r.rate("instance_where", "xdp_nic_rx_host_drops")
}
func (r recorded) hostActions() string {
	return r.rate("instance_action", "xdp_nic_rx_xdp_packets")
}
func (r recorded) hostExc() string       { return r.rate("instance", "xdp_exceptions") }
func (r recorded) hostAER() string       { return r.rate("instance_class", "xdp_pcie_aer_errors") }
func (r recorded) hostRedirErr() string  { return r.rate("instance", "xdp_redirect_errors") }
func (r recorded) hostCacheMiss() string { return "instance:xdp_rx_cpus_cache_miss:max_ratio" }
func (r recorded) hostNAPIExh() string   { return "instance:xdp_napi_budget_exhausted:ratio" }
func (r recorded) hostNAPIKsi() string   { return "instance:xdp_napi_ksoftirqd:ratio" }
func (r recorded) qstats(stat string) string {
	return r.rate("instance_device", "xdp_netdev_qstats_"+stat)
}
func (r recorded) pcieBandwidth() string { return "instance_device:xdp_pcie_link_bandwidth_bytes:min" }
func (r recorded) pcieEstimate() string {
	return r.rate("instance_device_direction", "xdp_pcie_estimated_bytes")
}
func (r recorded) pcieMeasured() string {
	return r.rate("instance_device_direction", "xdp_pcie_measured_bytes")
}
func (r recorded) ddioWrites() string {
	return r.rate("instance_socket", "xdp_uncore_ddio_writes")
}
func (r recorded) ddioWriteMiss() string {
	return r.ratio("instance_socket", "xdp_uncore_ddio_write_miss")
}
func (r recorded) xdpRemote() string {
	return r.ratio("instance_device", "xdp_rxq_packets_numa_remote")
}
func (r recorded) rxRemote() string {
	return r.ratio("instance_device", "xdp_netdev_queue_rx_packets_numa_remote")
}

// record is a recording rule.
func record(name, expr string) Rule { return Rule{Record: name, Expr: expr} }

// sumRater sums the per-second rate of a series (with the rules' selector
// sel) over window, by the labels given.
// xdpProgramRuns is the run rate of the XDP programs per host:
// xdp_bpf_prog_runs_total counts tc, tcx and netkit programs too, so only
// those on an XDP hook (xdp_bpf_prog_info) count.
func xdpProgramRuns(h, sel, window string) string {
	return "sum by (" + h + ") (\n  rate(" + withSelector("xdp_bpf_prog_runs_total", sel) + "[" + window + "])\n  and on (" + h + ", prog_id) " +
		withSelector("xdp_bpf_prog_info", sel) + "\n)"
}

func sumRater(sel, window string) func(by, series string) string {
	return func(by, series string) string {
		return "sum by (" + by + ") (rate(" + withSelector(series, sel) + "[" + window + "]))"
	}
}

// RecordingRules returns the recording rules: per-CPU, per-queue and
// per-device rates the alerts share, per-host roll-ups that keep the
// fleet dashboard cheap with hundreds of instances, and the records'
// heartbeat (recordsLoaded) that XDPRecordingRulesMissing watches.
func RecordingRules(cfg Config) RuleFile {
	f := recordingRules(cfg)
	g := &f.Groups[0]
	g.Rules = append(g.Rules, record(recordsLoaded,
		"label_replace(group by ("+cfg.hostLabels()+") ("+withSelector("up", cfg.Selector)+` == 1), "records", "`+recordsFingerprint(f)+`", "", "")`))
	return f
}

// recordsLoaded is recorded per exporter while the recording rules are
// loaded, with their fingerprint in its records label.
const recordsLoaded = "instance:xdp_recording_rules:loaded"

// recordsFingerprint names a generation of the recording rules: a hash
// of every record's name and expression. alerts.yml expects the
// fingerprint of the records it was generated with, so a records file of
// another release (a rename half applied) is as missing as none.
func recordsFingerprint(f RuleFile) string {
	h := sha256.New()
	for _, g := range f.Groups {
		for _, r := range g.Rules {
			fmt.Fprintf(h, "%s\x00%s\x00", r.Record, r.Expr)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}

func recordingRules(cfg Config) RuleFile {
	r := recorded{cfg.RateWindow}
	h, sel := cfg.hostLabels(), cfg.Selector
	w := "[" + cfg.RateWindow + "]"
	rec, sumRate := record, sumRater(sel, cfg.RateWindow)
	rxOnly := func(expr string) string { return expr + " and on (" + h + ", cpu) " + r.rxCPU() }
	rules := []Rule{
		rec(r.cpuRxq(), sumRate(h+", cpu", "xdp_rxq_packets_total")),
		// The RXQ:CPU pairs of xdp_rxq_info: which CPU serves which queue.
		rec(r.queueCPURxq(), sumRate(h+", device, queue, cpu", "xdp_rxq_packets_total")),
		// The same with the queue's NAPI, IRQ and the CPUs that IRQ runs on,
		// where the driver reports them (netdev queue-get).
		rec(r.queueCPUIRQ(), r.queueCPURxq()+"\n* on ("+h+", device, queue) group_left (napi_id, irq)\n"+
			"max by ("+h+", device, queue, napi_id, irq) ("+withSelector(`xdp_netdev_queue_info{direction="rx"}`, sel)+")\nor\n"+r.queueCPURxq()),
		rec(r.queueRxq(), "sum by ("+h+", device, queue) ("+r.queueCPURxq()+")"),
		rec(r.deviceRxq(), "sum by ("+h+", device) ("+r.queueRxq()+")"),
		// Normalised by the CPU's total so a ratio stays within 0..1 even
		// when USER_HZ ticks jitter against the scrape.
		rec(r.cpuMode(), sumRate(h+", cpu, mode", "xdp_cpu_seconds_total")+
			"\n/ on ("+h+", cpu) group_left ()\n"+sumRate(h+", cpu", "xdp_cpu_seconds_total")),
		rec(r.rxCPU(), "group by ("+h+", cpu) (\n  "+r.cpuRxq()+" > "+num(cfg.RXCPU.MinPackets)+
			"\n  or\n  "+r.cpuMode()+`{mode="softirq"} > `+num(cfg.RXCPU.MinSoftirqRatio)+"\n)"),
		// The RX CPUs' modes, or every CPU's on a host with no RX CPU to
		// tell (mpstat's view).
		rec(r.rxCPUMode(), r.cpuMode()+" and on ("+h+", cpu) "+r.rxCPU()+"\nor\n("+r.cpuMode()+" unless on ("+h+") "+r.rxCPU()+")"),
		rec(r.rxIdle(), "avg by ("+h+") ("+rxOnly(r.cpuMode()+`{mode="idle"}`)+")"),
		rec(r.rxSoftirq(), "avg by ("+h+") ("+rxOnly(r.cpuMode()+`{mode="softirq"}`)+")"),
		rec(r.rxCPUs(), "count by ("+h+") ("+r.rxCPU()+")"),
		// Each RX queue's packets, for the RSS spread on every host: the
		// rxq collector's count where it runs (exact, by verdict), else
		// the kernel's per-queue stats (netdev qstats, 6.10+ drivers),
		// else the driver's own per-queue counter (ethtool -S), which
		// costs nothing on the packet path. source says which.
		rec(r.rxQueue(), `label_replace(`+r.queueRxq()+`, "source", "xdp_rxq", "", "")`+
			"\nor on ("+h+", device)\n"+`label_replace(`+sumRate(h+", device, queue", `xdp_netdev_queue_rx_packets_total{direction="rx"}`)+`, "source", "netdev_qstats", "", "")`+
			"\nor on ("+h+", device)\n"+`label_replace(`+sumRate(h+", device, queue", `xdp_nic_rx_queue_packets_total{queue!=""}`)+`, "source", "ethtool", "", "")`),
		rec(r.rxImbalance(), "max by ("+h+", device, source) ("+r.rxQueue()+" > "+num(cfg.RSSImbalance.MinQueuePackets)+")\n/\navg by ("+h+", device, source) ("+r.rxQueue()+" > "+num(cfg.RSSImbalance.MinQueuePackets)+")"),
		rec(r.portRx(), sumRate(h+", device", `xdp_nic_port_packets_total{direction="rx"}`)),
		rec(r.hostDrops(), sumRate(h+", device, where", "xdp_nic_rx_host_drops_total")),
		rec(r.allocFailures(), sumRate(h+", device", "xdp_nic_rx_alloc_failures_total")),
		rec(r.pageCache(), sumRate(h+", device, event", "xdp_nic_rx_page_cache_events_total")),
		rec(r.pagePool(), sumRate(h+", device, path", "xdp_nic_rx_page_pool_allocations_total")),
		rec(r.cqePackets(), sumRate(h+", device", "xdp_nic_rx_cqe_compressed_packets_total")),
		rec(r.cqeBlocks(), sumRate(h+", device", "xdp_nic_rx_cqe_compressed_blocks_total")),
		rec(r.xdpActions(), sumRate(h+", device, action", "xdp_nic_rx_xdp_packets_total")),
		rec(r.cacheRefs(), sumRate(h+", cpu", "xdp_perf_cache_references_total")),
		rec(r.cacheMiss(), sumRate(h+", cpu", "xdp_perf_cache_misses_total")+"\n/\n"+r.cacheRefs()),
		rec(r.ipc(), sumRate(h+", cpu", "xdp_perf_instructions_total")+"\n/\n"+sumRate(h+", cpu", "xdp_perf_cycles_total")),
		rec(r.napiPolls(), sumRate(h+", device, context", "xdp_napi_poll_work_count")),
		rec(r.napiPackets(), sumRate(h+", device, context", "xdp_napi_poll_work_sum")),
		rec(r.napiExhausted(), sumRate(h+", device, context", "xdp_napi_polls_budget_exhausted_total")),
		// Packets the device received, from whichever source the host has:
		// netdev qstats (drivers with queue stats), else NAPI's packet count.
		rec(r.deviceRx(), sumRate(h+", device", "xdp_netdev_qstats_rx_packets_total")+
			"\nor\nsum by ("+h+", device) ("+r.napiPackets()+")"),
		// The device totals, which go on across program reloads.
		rec(r.exceptions(), sumRate(h+", device", "xdp_monitor_exceptions_total")),
		rec(r.redirectErrs(), sumRate(h+", device", "xdp_monitor_redirect_errors_total")),

		// Per-host roll-ups for the fleet view. Packets XDP processed: without the rxq collector (it is opt-in)
		// the driver's per-queue XDP counters stand in for it, and per host
		// the attached programs' run counts for both.
		rec(r.deviceXDP(), r.deviceRxq()+"\nor\nsum by ("+h+", device) ("+r.xdpActions()+")"),
		rec(r.hostXDP(), "sum by ("+h+") ("+r.deviceXDP()+")\nor\n"+xdpProgramRuns(h, sel, cfg.RateWindow)),
		rec(r.hostPortRx(), "sum by ("+h+") ("+r.portRx()+")"),
		rec(r.hostVerdicts(), sumRate(h+", action", "xdp_rxq_packets_total")),
		rec(r.hostHostDrops(), "sum by ("+h+", where) ("+r.hostDrops()+")"),
		rec(r.hostActions(), "sum by ("+h+", action) ("+r.xdpActions()+")"),
		rec(r.hostExc(), "sum by ("+h+") ("+r.exceptions()+")"),
		rec(r.hostRedirErr(), "sum by ("+h+") ("+r.redirectErrs()+")"),
		rec(r.hostAER(), sumRate(h+", class", "xdp_pcie_aer_errors_total")),
		rec(r.hostCacheMiss(), "max by ("+h+") ("+rxOnly(r.cacheMiss())+")"),
		rec(r.hostNAPIExh(), "sum by ("+h+") ("+r.napiExhausted()+")\n/\nsum by ("+h+") ("+r.napiPolls()+")"),
		rec(r.hostNAPIKsi(), "sum by ("+h+") ("+r.napiPolls()+`{context="ksoftirqd"})`+"\n/\nsum by ("+h+") ("+r.napiPolls()+")"),
	}
	rules = append(append(rules, pcieRecordingRules(cfg, r, h, sel, w, sumRate)...), nicConfigRecordingRules(r, h, sel, sumRate)...)
	rules = append(append(rules, uncoreRecordingRules(r, h, sel, w, sumRate)...),
		record(r.progRunTime(), sumRate(h+", prog_id, name", "xdp_bpf_prog_run_seconds_total")+"\n/\n"+sumRate(h+", prog_id, name", "xdp_bpf_prog_runs_total")))
	return RuleFile{Groups: []RuleGroup{{Name: "xdp_exporter.recording", Rules: rules}}}
}

// pcieRecordingRules record the PCIe estimate and the NUMA shares: the
// NIC's byte and packet rates (netdev qstats), the narrowest link on its
// path, the estimated PCIe bytes per direction under cfg.PCIeBusy.Model,
// and the share of XDP packets (rxq, per CPU) and of NIC RX (qstats, per
// queue) processed on CPUs remote from the NIC's NUMA node.
func pcieRecordingRules(cfg Config, r recorded, h, sel, w string, sumRate func(by, series string) string) []Rule {
	rec := record
	m := cfg.PCIeBusy.Model
	rxB, rxP, txB, txP := r.qstats("rx_bytes"), r.qstats("rx_packets"), r.qstats("tx_bytes"), r.qstats("tx_packets")
	// Data in TLPs of at most MaxPayloadBytes, each with its overhead,
	// plus per packet a completion write (upstream) or descriptor read
	// (downstream) TLP.
	data := func(bytes, packets string) string {
		return bytes + " + (" + packets + " + " + bytes + " / " + num(m.MaxPayloadBytes) + ") * " + num(m.TLPOverheadBytes)
	}
	perPacket := func(size float64) string {
		return "(" + rxP + " + " + txP + ") * " + num(size+m.TLPOverheadBytes)
	}
	direction := func(dir, expr string) string {
		return `label_replace(` + expr + `, "direction", "` + dir + `", "", "")`
	}
	remote := func(series, remoteFlag, on string) string {
		rate := "rate(" + withSelector(series, sel) + w + ")"
		return "sum by (" + h + ", device) (\n  " + rate + "\n  * on (" + h + ", device, " + on + ") group_left ()\n  " + withSelector(remoteFlag, sel) +
			"\n)\n/\nsum by (" + h + ", device) (" + rate + ")"
	}
	// The share of a device's packets that CPUs of another NUMA node
	// processed: each CPU's node (xdp_pcie_cpu_info) against the NIC's
	// (xdp_pcie_device_info), 0 where every CPU is local, absent for a
	// NIC without a node.
	cpuRemote := func(series string) string {
		rate := "rate(" + withSelector(series, sel) + w + ")"
		local := withSelector(`xdp_pcie_device_info{numa_node!="-1"}`, sel)
		all := "sum by (" + h + ", device) (\n  " + rate + "\n  and on (" + h + ", device) " + local + "\n)"
		return "(\n  sum by (" + h + ", device) (\n    " + rate + "\n    * on (" + h + ", cpu) group_left (numa_node) " + withSelector("xdp_pcie_cpu_info", sel) +
			"\n    unless on (" + h + ", device, numa_node) " + local + "\n  )\n  or on (" + h + ", device)\n  0 * " + all + "\n)\n/\n" + all
	}
	return []Rule{
		rec(rxB, sumRate(h+", device", "xdp_netdev_qstats_rx_bytes_total")),
		rec(rxP, sumRate(h+", device", "xdp_netdev_qstats_rx_packets_total")),
		rec(txB, sumRate(h+", device", "xdp_netdev_qstats_tx_bytes_total")),
		rec(txP, sumRate(h+", device", "xdp_netdev_qstats_tx_packets_total")),
		rec(r.pcieBandwidth(), "min by ("+h+", device) ("+withSelector("xdp_pcie_link_bandwidth_bytes_per_second", sel)+")"),
		// One rule per recorded name (promtool's lint: two rules writing
		// the same name and labels race), the directions joined by or.
		rec(r.pcieEstimate(), direction("upstream", data(rxB, rxP)+" + "+perPacket(m.CompletionBytes))+
			"\nor\n"+direction("downstream", data(txB, txP)+" + "+perPacket(m.DescriptorBytes))),
		rec(r.xdpRemote(), cpuRemote("xdp_rxq_packets_total")),
		rec(r.rxRemote(), remote(`xdp_netdev_queue_rx_packets_total{direction="rx"}`, "xdp_pcie_rx_queue_numa_remote_ratio", "queue")),
	}
}

// uncoreRecordingRules record what the uncore collector measures: each
// NIC's root-complex traffic per direction (upstream, device to host:
// the devices' writes to memory and the completions of the CPUs' MMIO
// reads, what the free-running bw_in counters count; downstream: the
// devices' reads of memory and the CPUs' MMIO writes, bw_out), the IIO
// stack's bytes given to every NIC behind it, and per
// socket the device writes (ItoM, ItoMCacheNear) and the share of them
// that missed the LLC: DDIO's miss ratio.
func uncoreRecordingRules(r recorded, h, sel, w string, sumRate func(by, series string) string) []Rule {
	iio := func(transaction, op string) string {
		return "rate(" + withSelector(`xdp_uncore_iio_bytes_total{transaction="`+transaction+`",op="`+op+`"}`, sel) + w + ")"
	}
	// The stack's free-running counters where the kernel names them (no
	// counter used, never multiplexed), else its DATA_REQ events.
	perDevice := func(dir, freeRunning, stackBytes string) string {
		free := "sum by (" + h + ", socket, iio) (rate(" + withSelector(`xdp_uncore_iio_free_running_bytes_total{flow="`+freeRunning+`"}`, sel) + w + "))"
		return "sum by (" + h + ", device, direction) (\n  label_replace(" + free + "\n  or on (" + h + ", socket, iio)\n  sum by (" + h + ", socket, iio) (" + stackBytes + `), "direction", "` + dir + `", "", "")` +
			"\n  * on (" + h + ", socket, iio) group_right (direction)\n  " + withSelector("xdp_uncore_iio_device_info", sel) + "\n)"
	}
	// Hits plus misses: absent where no hit event is counted (Skylake-SP,
	// Cascade Lake), so that misses alone never make a ratio of 1.
	writes := func(result string) string {
		return sumRate(h+", socket", `xdp_uncore_ddio_requests_total{request=~"itom|itomcachenear",result="`+result+`"}`)
	}
	return []Rule{
		record(r.pcieMeasured(), perDevice("upstream", "in", iio("inbound", "write")+" or "+iio("outbound", "read"))+
			"\nor\n"+perDevice("downstream", "out", iio("inbound", "read")+" or "+iio("outbound", "write"))),
		record(r.ddioWrites(), writes("hit")+"\n+\n"+writes("miss")),
		record(r.ddioWriteMiss(), writes("miss")+"\n/\n"+r.ddioWrites()),
	}
}

// Alert names, also the runbook section titles.
const (
	AlertNICDropsWhileIdle = "XDPNICDropsWhileRXCPUsIdle"
	AlertRxOutOfBuffer     = "XDPRxOutOfBuffer"
	AlertPageCacheStarved  = "XDPRxPageCacheStarved"
	AlertPCIeStalled       = "XDPPCIeOutboundStalled"
	AlertDDIOCacheMiss     = "XDPDDIOCacheMissHigh"
	AlertDDIOWriteMiss     = "XDPDDIOWriteMissHigh"
	AlertRSSImbalance      = "XDPRSSImbalance"
	AlertRXQueuesShareCPU  = "XDPRXQueuesShareCPU"
	AlertExporterDown      = "XDPExporterDown"
	AlertExceptions        = "XDPExceptions"
	AlertRedirectErrors    = "XDPRedirectErrors"
	AlertDevmapDrops       = "XDPDevmapXmitDrops"
	AlertCpumapDrops       = "XDPCpumapDrops"
	AlertNAPIOverload      = "XDPNAPISoftirqOverload"
	AlertProgramNotRunning = "XDPProgramNotRunning"
	AlertCollectorFailing  = "XDPExporterCollectorFailing"
	AlertStackDrops        = "XDPStackDrops"
	AlertPCIeLinkDegraded  = "XDPPCIeLinkDegraded"
	AlertPCIeAERUncorr     = "XDPPCIeAERUncorrectable"
	AlertPCIeAERCorr       = "XDPPCIeAERCorrectable"
	AlertRemoteNUMA        = "XDPRemoteNUMA"
	AlertPCIeBusy          = "XDPPCIeBusy"
	// AlertRecordingRulesMissing: the alerts' records are not recorded.
	AlertRecordingRulesMissing = "XDPRecordingRulesMissing"
)

// queryValue renders, inside an alert annotation, the first value of a
// PromQL query built from the alert's labels, formatted by fn.
func queryValue(format, args, fn string) string {
	return `{{ with printf "` + format + `" ` + args + ` | query }}{{ . | first | value | ` + fn + ` }}{{ else }}unknown{{ end }}`
}

// AlertingRules returns the alerts with the thresholds of cfg.
func AlertingRules(cfg Config) RuleFile {
	r := recorded{cfg.RateWindow}
	h, sel := cfg.hostLabels(), cfg.Selector
	alert := cfg.alertRule
	inst := `{instance='%s'}`
	instDev := `{instance='%s',device='%s'}`

	// The drops of a device with no port counter (virtio_net, veth) have
	// no ratio to pass: their rate alone is the condition.
	port := "sum by (" + h + ", device) (" + r.portRx() + ")"
	ofPort := func(drops, ratio string) string {
		return "(\n  " + drops + " / on (" + h + ", device) group_left ()\n  " + port + " > " + ratio +
			"\n  or\n  " + drops + " unless on (" + h + ", device) " + port + "\n)"
	}
	// The counters behind a device's drops, "rx_discards_phy (port,
	// ethtool), rx_out_of_buffer (ring, ethtool)".
	dropStats := func(where string) string {
		return `{{ range $i, $s := printf "xdp_nic_signal_source_info{instance='%s',device='%s',family='xdp_nic_rx_host_drops_total'` + where + `}" $labels.instance $labels.device | query | sortByLabel "stat" }}` +
			`{{ if $i }}, {{ end }}{{ $s.Labels.stat }} ({{ with $s.Labels.where }}{{ . }}, {{ end }}{{ $s.Labels.source }}){{ end }}`
	}
	portValue := queryValue("sum by (instance, device) ("+r.portRx()+instDev+")", "$labels.instance $labels.device", "humanize")

	c := cfg.NICDropsWhileIdle
	drops := "sum by (" + h + ", device) (" + r.hostDrops() + ")"
	nicDrops := alert(AlertNICDropsWhileIdle,
		"(\n  "+drops+" > "+num(c.MinDiscards)+"\n  and\n  "+ofPort(drops, num(c.MinRatio))+"\n)\nand on ("+h+")\n"+r.rxIdle()+" > "+num(c.MinIdleRatio),
		c.For, c.Severity,
		"{{ $labels.device }} on {{ $labels.instance }} drops packets for lack of host resources while its RX CPUs are idle",
		"The NIC drops {{ $value | humanize }} packets/s for lack of host resources ("+dropStats("")+") out of "+
			portValue+" packets/s received at the port, while the RX CPUs are "+
			queryValue(r.rxIdle()+inst, "$labels.instance", "humanizePercentage")+
			" idle on average: the host, not the CPUs, cannot move packets off the NIC fast enough.")

	o := cfg.RxOutOfBuffer
	ring := "sum by (" + h + ", device) (" + r.hostDrops() + `{where="ring"})`
	oob := alert(AlertRxOutOfBuffer,
		ring+" > "+num(o.MinDrops)+"\nand\n"+ofPort(ring, num(o.MinRatio)),
		o.For, o.Severity,
		"{{ $labels.device }} on {{ $labels.instance }} drops packets for lack of RX buffers",
		"The NIC found no RX descriptor or buffer posted for {{ $value | humanize }} packets/s ("+dropStats(",where='ring'")+") out of "+
			portValue+" packets/s at the port, while the RX CPUs are "+
			queryValue(r.rxIdle()+inst, "$labels.instance", "humanizePercentage")+
			" idle on average (busy: CPU overload; idle: page recycling starves the refill).")

	p := cfg.PageCacheStarved
	slowCache := `sum by (` + h + `, device) (` + r.pageCache() + `{event="empty"})`
	allCache := `sum by (` + h + `, device) (` + r.pageCache() + `{event=~"empty|reuse"})`
	slowPool := `sum by (` + h + `, device) (` + r.pagePool() + `{path=~"slow|slow_high_order"})`
	allPool := `sum by (` + h + `, device) (` + r.pagePool() + `{path=~"fast|slow|slow_high_order"})`
	page := alert(AlertPageCacheStarved,
		"(\n  "+slowCache+" / "+allCache+" > "+num(p.MinRatio)+"\n  and\n  "+slowCache+" > "+num(p.MinSlow)+
			"\n)\nor\n(\n  "+slowPool+" / "+allPool+" > "+num(p.MinRatio)+"\n  and\n  "+slowPool+" > "+num(p.MinSlow)+"\n)",
		p.For, p.Severity,
		"{{ $labels.device }} on {{ $labels.instance }} allocates RX pages outside its page cache",
		"{{ $value | humanizePercentage }} of the RX page allocations miss the driver's page cache or page_pool fast path "+
			"(mlx5 rx_cache_empty vs rx_cache_reuse, or page_pool slow vs fast): each costs a page allocator call.")

	s := cfg.PCIeStalled
	pcie := alert(AlertPCIeStalled,
		"max by ("+h+", device, op) (avg_over_time(xdp_nic_pci_outbound_stalled_ratio{"+sel+"}["+s.Window+"])) > "+num(s.MaxAvgRatio)+
			"\nor\nsum by ("+h+", device, op) (rate(xdp_nic_pci_outbound_stalled_seconds_total{"+sel+"}["+s.Window+"])) > "+num(s.MaxStalledSeconds),
		s.For, s.Severity,
		"{{ $labels.device }} on {{ $labels.instance }} stalls on PCIe {{ $labels.op }}s",
		"The NIC could not issue outbound PCIe {{ $labels.op }}s for lack of credits (mlx5 outbound_pci_stalled_rd/wr) "+
			"{{ $value | humanizePercentage }} of the time.")

	d := cfg.DDIOCacheMiss
	ddio := alert(AlertDDIOCacheMiss,
		r.cacheMiss()+" > "+num(d.MaxRatio)+
			"\nand on ("+h+", cpu)\n"+r.cacheRefs()+" > "+num(d.MinReferences)+
			"\nand on ("+h+", cpu)\n"+r.rxCPU()+
			// The fallback: where the uncore collector measures the
			// device writes' misses, XDPDDIOWriteMissHigh speaks instead.
			"\nunless on ("+h+")\n"+r.ddioWriteMiss(),
		d.For, d.Severity,
		"RX CPU {{ $labels.cpu }} on {{ $labels.instance }} misses the last-level cache",
		"{{ $value | humanizePercentage }} of the last-level cache references on RX CPU {{ $labels.cpu }} miss (IPC "+
			queryValue(r.ipc()+`{instance='%s',cpu='%s'}`, "$labels.instance $labels.cpu", `printf "%.2f"`)+
			"); RX rings now: "+
			`{{ with printf "xdp_nic_ring_descriptors{instance='%s',ring='rx'}" $labels.instance | query }}{{ range . }}{{ .Labels.device }}={{ .Value }} {{ end }}{{ else }}unknown{{ end }}`+
			"descriptors.")
	dw := cfg.DDIOWriteMiss
	ddioWrites := alert(AlertDDIOWriteMiss,
		r.ddioWriteMiss()+" > "+num(dw.MaxRatio)+"\nand on ("+h+", socket)\n"+r.ddioWrites()+" > "+num(dw.MinReferences),
		dw.For, dw.Severity,
		"Device writes on socket {{ $labels.socket }} of {{ $labels.instance }} miss the LLC (DDIO)",
		"{{ $value | humanizePercentage }} of the full-line device writes (ItoM, ItoMCacheNear) on socket {{ $labels.socket }} missed the last-level cache, "+
			"measured by the uncore CHA counters: packet data goes to DRAM and the RX CPUs read it from there. RX rings now: "+
			`{{ with printf "xdp_nic_ring_descriptors{instance='%s',ring='rx'}" $labels.instance | query }}{{ range . }}{{ .Labels.device }}={{ .Value }} {{ end }}{{ else }}unknown{{ end }}`+"descriptors.")

	b := cfg.RSSImbalance
	busyQ := "(" + r.rxQueue() + " > " + num(b.MinQueuePackets) + ")"
	rss := alert(AlertRSSImbalance,
		r.rxQueue()+"\n> on ("+h+", device) group_left ()\n"+num(b.MaxOverMean)+" * avg by ("+h+", device) "+busyQ+
			"\nand on ("+h+", device)\ncount by ("+h+", device) "+busyQ+" >= "+strconv.Itoa(b.MinQueues),
		b.For, b.Severity,
		"RSS imbalance on {{ $labels.device }} ({{ $labels.instance }}): RX queue {{ $labels.queue }} carries more than its share",
		"RX queue {{ $labels.queue }} of {{ $labels.device }} receives {{ $value | humanize }} packets/s, more than "+num(b.MaxOverMean)+"x the mean of its busy queues ("+
			queryValue(`avg(`+r.rxQueue()+`{instance='%s',device='%s'} > `+num(b.MinQueuePackets)+`)`, "$labels.instance $labels.device", "humanize")+
			" packets/s; counted by {{ $labels.source }}). "+rssTableVerdict(r, cfg))

	sc := cfg.RXQueuesShareCPU
	sharing := "count by (" + h + ", device, cpu) (" + r.queueCPURxq() + " > " + num(sc.MinQueuePackets) + ")"
	share := alert(AlertRXQueuesShareCPU,
		sharing+" >= "+strconv.Itoa(sc.MinQueues)+
			"\nand on ("+h+")\n(\n  count by ("+h+") (count by ("+h+", device, queue) ("+r.queueCPURxq()+" > "+num(sc.MinQueuePackets)+"))"+
			"\n  <= on ("+h+")\n  count by ("+h+") ("+r.cpuMode()+`{mode="idle"}`+")\n)",
		sc.For, sc.Severity,
		"{{ $value }} busy RX queues of {{ $labels.device }} share CPU {{ $labels.cpu }} ({{ $labels.instance }})",
		"CPU {{ $labels.cpu }} processes {{ $value }} RX queues of {{ $labels.device }} above "+num(sc.MinQueuePackets)+" packets/s each, although the host has a CPU for every busy queue. "+
			// Which fix: busy queues whose IRQs run on that CPU alone were
			// put there by IRQ affinity (netdev netlink's queue -> NAPI ->
			// IRQ and /proc/irq/N/effective_affinity_list); otherwise RSS
			// or RPS steers them.
			`{{ with printf "count(xdp_netdev_queue_info{instance='%s',device='%s',direction='rx',irq!=''})" $labels.instance $labels.device | query }}`+
			`{{ with printf "count(xdp_netdev_queue_info{instance='%s',device='%s',direction='rx'} * on (instance, device, irq) group_left () xdp_netdev_irq_affinity_info{effective_cpus='%s'})" $labels.instance $labels.device $labels.cpu | query }}`+
			`{{ if ge (. | first | value) 2.0 }}{{ . | first | value }} of its RX queues have their IRQ on CPU {{ $labels.cpu }} alone: IRQ affinity put them there, not RSS (/proc/irq/N/smp_affinity_list).`+
			`{{ else }}Their IRQs do not share CPU {{ $labels.cpu }}: RSS or RPS steers the queues there, not IRQ affinity.{{ end }}`+
			`{{ else }}Their IRQs do not share CPU {{ $labels.cpu }}: RSS or RPS steers the queues there, not IRQ affinity.{{ end }}`+
			`{{ else }}The driver links no RX queue to an IRQ (netdev netlink), so whether IRQ affinity or RSS put them there is not known.{{ end }}`)

	event := func(name string, e EventConfig, expr, summary, description string) Rule {
		return alert(name, "(\n"+expr+"\n) > "+num(e.MaxPerSecond), e.For, e.Severity, summary, description)
	}
	ex := cfg.Exceptions
	exc := event(AlertExceptions, ex,
		"sum by ("+h+", device, action) (rate(xdp_monitor_exceptions_total{"+sel+"}["+ex.Window+"]))",
		"XDP exceptions on {{ $labels.device }} ({{ $labels.instance }})",
		"{{ $value | humanize }} packets/s hit xdp:xdp_exception with action {{ $labels.action }} and are dropped.")
	re := cfg.RedirectErrors
	redir := event(AlertRedirectErrors, re,
		"sum by ("+h+", device, errno) (rate(xdp_monitor_redirect_errors_total{"+sel+"}["+re.Window+"]))",
		"XDP redirects fail on {{ $labels.device }} ({{ $labels.instance }}) with {{ $labels.errno }}",
		"{{ $value | humanize }} redirects/s fail with {{ $labels.errno }} (xdp:xdp_redirect_err).")
	dm := cfg.DevmapDrops
	devmap := event(AlertDevmapDrops, dm,
		"sum by ("+h+", from_device, to_device) (\n  rate(xdp_monitor_devmap_xmit_drops_total{"+sel+"}["+dm.Window+"])\n  + rate(xdp_monitor_devmap_xmit_errors_total{"+sel+"}["+dm.Window+"])\n)",
		"XDP redirect from {{ $labels.from_device }} to {{ $labels.to_device }} drops frames ({{ $labels.instance }})",
		"Bulk transmit of redirected frames (xdp:xdp_devmap_xmit) drops or fails {{ $value | humanize }}/s: the target's ndo_xdp_xmit refused them, usually a full TX ring on the egress device.")
	cm := cfg.CpumapDrops
	// Enqueue drops and kthread drops of the same CPU carry the same labels
	// here, so "A or B" would keep A (even at 0) and hide B: add them where
	// both exist, and take whichever exists otherwise.
	enq := "sum by (" + h + ", map_id, to_cpu) (rate(xdp_monitor_cpumap_enqueue_drops_total{" + sel + "}[" + cm.Window + "]))"
	kth := "sum by (" + h + ", map_id, to_cpu) (label_replace(rate(xdp_monitor_cpumap_kthread_drops_total{" + sel + "}[" + cm.Window + "]), \"to_cpu\", \"$1\", \"cpu\", \"(.*)\"))"
	cpumap := event(AlertCpumapDrops, cm,
		"  ("+enq+"\n  + "+kth+")\nor\n  "+enq+"\nor\n  "+kth,
		"cpumap drops frames for CPU {{ $labels.to_cpu }} ({{ $labels.instance }})",
		"{{ $value | humanize }} frames/s are dropped on the way to CPU {{ $labels.to_cpu }} of cpumap {{ $labels.map_id }}: its queue is full or its kthread drops them.")

	n := cfg.NAPIOverload
	polls := "sum by (" + h + ", device) (" + r.napiPolls() + ")"
	napi := alert(AlertNAPIOverload,
		"sum by ("+h+", device) ("+r.napiExhausted()+") / "+polls+" > "+num(n.MinExhaustedRatio)+
			"\nand\nsum by ("+h+", device) ("+r.napiPolls()+`{context="ksoftirqd"}) / `+polls+" > "+num(n.MinKsoftirqdRatio),
		n.For, n.Severity,
		"NAPI on {{ $labels.device }} ({{ $labels.instance }}) runs out of budget and falls back to ksoftirqd",
		"{{ $value | humanizePercentage }} of the NAPI polls of {{ $labels.device }} use their whole budget and "+
			queryValue(`sum(`+r.napiPolls()+`{instance='%s',device='%s',context='ksoftirqd'}) / sum(`+r.napiPolls()+`{instance='%s',device='%s'})`, "$labels.instance $labels.device $labels.instance $labels.device", "humanizePercentage")+
			" of them run in ksoftirqd.")

	pr := cfg.ProgramNotRunning
	prog := alert(AlertProgramNotRunning,
		"group by ("+h+", device, prog_id, name) ("+withSelector("xdp_bpf_prog_info", sel)+")\n"+
			"and on ("+h+", prog_id)\n(sum by ("+h+", prog_id) (rate(xdp_bpf_prog_runs_total{"+sel+"}["+pr.Window+"])) == 0)\n"+
			"and on ("+h+", device)\n("+r.deviceRx()+" > "+num(pr.MinPackets)+")\n"+
			"and on ("+h+")\n(max by ("+h+") ("+withSelector("xdp_bpf_stats_enabled", sel)+") == 1)",
		pr.For, pr.Severity,
		"XDP program {{ $labels.name }} (id {{ $labels.prog_id }}) on {{ $labels.device }} does not run ({{ $labels.instance }})",
		"{{ $labels.device }} receives "+
			queryValue(r.deviceRx()+instDev, "$labels.instance $labels.device", "humanize")+
			" packets/s, yet its XDP program {{ $labels.name }} (id {{ $labels.prog_id }}) has not run once in "+pr.Window+" while BPF statistics are on.")

	f := cfg.CollectorFailing
	success := withSelector("xdp_scrape_collector_success", sel)
	if len(f.IgnoredCollectors) > 0 {
		success = withSelector(success, `collector!~"`+strings.Join(f.IgnoredCollectors, "|")+`"`)
	}
	coll := alert(AlertCollectorFailing,
		success+" == 0",
		f.For, f.Severity,
		"xdp_exporter collector {{ $labels.collector }} fails on {{ $labels.instance }}",
		"The {{ $labels.collector }} collector has reported failure for "+f.For+"; its metrics are missing or partial, and the exporter's log says why.")

	sd := cfg.StackDrops
	stackDrops := alert(AlertStackDrops,
		"sum by ("+h+", device, reason) (rate(xdp_drop_packets_total{"+sel+`,reason=~"`+strings.Join(sd.Reasons, "|")+`"}[`+sd.Window+"]))\n> "+num(sd.MinPerSecond),
		sd.For, sd.Severity,
		"The stack drops packets on {{ $labels.device }} as {{ $labels.reason }} ({{ $labels.instance }})",
		"{{ $value | humanize }} packets/s are dropped on {{ $labels.device }} with reason {{ $labels.reason }} (skb:kfree_skb).")

	pl := cfg.PCIeLinkDegraded
	linkDegraded := alert(AlertPCIeLinkDegraded,
		"max by ("+h+", device, hop, pci_address) ("+withSelector("xdp_pcie_link_degraded", sel)+") == 1",
		pl.For, pl.Severity,
		"The PCIe link of {{ $labels.device }} at {{ $labels.pci_address }} trained below its capability ({{ $labels.instance }})",
		"The link at hop {{ $labels.hop }} of {{ $labels.device }}'s path runs at "+
			queryValue(`xdp_pcie_link_speed_transfers_per_second{instance='%s',device='%s',hop='%s'} / 1e9`, "$labels.instance $labels.device $labels.hop", `printf "%.1f"`)+
			" GT/s x"+queryValue(`xdp_pcie_link_width_lanes{instance='%s',device='%s',hop='%s'}`, "$labels.instance $labels.device $labels.hop", `printf "%.0f"`)+
			", less than both of its ends can do.")
	ae := cfg.PCIeAER
	aerUncorr := alert(AlertPCIeAERUncorr,
		"sum by ("+h+", device, pci_address, class, error) (increase(xdp_pcie_aer_errors_total{"+sel+`,class=~"nonfatal|fatal"}[`+ae.Window+"])) > 0",
		"", ae.UncorrectableSeverity,
		"{{ $labels.device }} reported a {{ $labels.class }} PCIe error ({{ $labels.instance }})",
		"{{ $labels.device }} ({{ $labels.pci_address }}) logged {{ $value | humanize }} {{ $labels.class }} AER errors {{ $labels.error }} in the last "+ae.Window+".")
	aerCorr := alert(AlertPCIeAERCorr,
		"sum by ("+h+", device, pci_address) (rate(xdp_pcie_aer_errors_total{"+sel+`,class="correctable"}[`+ae.Window+"])) > "+num(ae.MaxCorrectablePerSecond),
		ae.CorrectableFor, ae.Severity,
		"{{ $labels.device }} logs correctable PCIe errors ({{ $labels.instance }})",
		"{{ $labels.device }} ({{ $labels.pci_address }}) logs {{ $value | humanize }} correctable AER errors per second.")
	rn := cfg.RemoteNUMA
	remoteShare := func(source, ratio, traffic string) string {
		return `label_replace(` + ratio + " > " + num(rn.MaxRemoteRatio) + " and on (" + h + ", device) " + traffic + " > " + num(rn.MinPackets) +
			`, "source", "` + source + `", "", "")`
	}
	remoteNUMA := alert(AlertRemoteNUMA,
		remoteShare("xdp", r.xdpRemote(), r.deviceRxq())+"\nor\n"+remoteShare("nic_rx", r.rxRemote(), r.qstats("rx_packets")),
		rn.For, rn.Severity,
		"{{ $labels.device }}'s packets are processed on CPUs of another NUMA node ({{ $labels.instance }})",
		"{{ $value | humanizePercentage }} of {{ $labels.device }}'s {{ if eq $labels.source \"xdp\" }}XDP packets{{ else }}received packets{{ end }} are processed on CPUs remote from its NUMA node.")
	pb := cfg.PCIeBusy
	use := func(bytes, source string) string {
		return `label_replace(` + bytes + "\n/ on (" + h + ", device) group_left ()\n" + r.pcieBandwidth() + `, "source", "` + source + `", "", "")`
	}
	// Measured at the root complex where the uncore collector runs, the
	// model's estimate elsewhere; source says which.
	busy := alert(AlertPCIeBusy,
		"(\n"+use(r.pcieMeasured(), "measured")+"\nor\n"+use(r.pcieEstimate(), "estimate")+"\n  unless on ("+h+", device, direction) "+r.pcieMeasured()+"\n)\n> "+num(pb.MaxUseRatio),
		pb.For, pb.Severity,
		"{{ $labels.device }}'s PCIe link is near its bandwidth {{ $labels.direction }} ({{ $labels.instance }})",
		"The {{ if eq $labels.source \"measured\" }}measured (uncore IIO, the root complex's bytes){{ else }}estimated{{ end }} {{ $labels.direction }} PCIe traffic of {{ $labels.device }} is {{ $value | humanizePercentage }} of the narrowest link on its path.")

	d2 := cfg.ExporterDown
	down := alert(AlertExporterDown,
		"up{"+sel+"} == 0\nor\nabsent(up{"+sel+"})",
		d2.For, d2.Severity,
		"{{ with $labels.instance }}xdp_exporter on {{ . }} cannot be scraped{{ else }}no xdp_exporter target matches "+sel+"{{ end }}",
		"Prometheus has not scraped xdp_exporter ("+sel+") for "+d2.For+": the target is down, or no target of the job exists at all; every other XDP alert is silent meanwhile.")

	rm := cfg.RecordingRulesMissing
	fp := recordsFingerprint(recordingRules(cfg))
	missing := alert(AlertRecordingRulesMissing,
		"group by ("+h+") (up{"+sel+"} == 1)\nunless on ("+h+")\n"+recordsLoaded+`{records="`+fp+`"}`,
		rm.For, rm.Severity,
		"The XDP alerts of {{ $labels.instance }} read recorded series that are not recorded",
		"The exporter on {{ $labels.instance }} is up, but the records its alerts read (recording.yml) are "+
			`{{ with printf "`+recordsLoaded+`{instance='%s'}" $labels.instance | query }}of another release (records fingerprint {{ . | first | label "records" }}, not the alerts' own){{ else }}not recorded{{ end }}`+
			": every alert that reads them stays silent.")

	rules := []Rule{
		down, missing, nicDrops, oob, page, pcie, ddio, ddioWrites, rss, share, exc, redir, devmap, cpumap, napi, prog, coll, stackDrops,
		linkDegraded, aerUncorr, aerCorr, remoteNUMA, busy,
	}
	return RuleFile{Groups: []RuleGroup{{Name: "xdp_exporter.alerts", Rules: append(append(rules, setupAlerts(cfg, alert)...), nicConfigAlerts(cfg, alert)...)}}}
}

// alertRule is an alert with its severity, summary, description (the
// measured figures), one-line action and runbook link. Its annotations'
// queries select the alert's whole identity (withIdentity).
func (c Config) alertRule(name, expr, forDur, severity, summary, description string) Rule {
	return Rule{
		Alert:  name,
		Expr:   expr,
		For:    forDur,
		Labels: map[string]string{"severity": severity},
		Annotations: map[string]string{
			"summary":     c.withIdentity(summary),
			"description": c.withIdentity(description),
			"action":      actions[name],
			"runbook_url": c.RunbookURL + "#" + strings.ToLower(name),
		},
	}
}

// templateQuery is a query an annotation builds: printf "FORMAT" and the
// $labels it fills in.
var templateQuery = regexp.MustCompile(`printf "((?:[^"\\]|\\.)*)"((?: \$labels\.\w+)+)`)

// withIdentity makes every annotation query that selects an instance
// select its cluster and job too: at a global tier that holds several
// clusters, two hosts may share a name. At the edge the series and the
// alert carry no cluster label (Prometheus adds it on sending), and
// cluster=” selects exactly those.
func (c Config) withIdentity(text string) string {
	idFormat, idArgs := "job='%s',", []string{"$labels.job"}
	if c.ClusterLabel != "" {
		idFormat, idArgs = c.ClusterLabel+"='%s',"+idFormat, append([]string{"$labels." + c.ClusterLabel}, idArgs...)
	}
	const instance = "instance='%s'"
	return templateQuery.ReplaceAllStringFunc(text, func(q string) string {
		m := templateQuery.FindStringSubmatch(q)
		format, args := m[1], strings.Fields(m[2])
		var f strings.Builder
		var out []string
		next := 0 // the argument of the next %s
		for i := 0; i < len(format); {
			switch {
			case strings.HasPrefix(format[i:], instance):
				f.WriteString(idFormat + instance)
				out = append(append(out, idArgs...), args[next])
				next++
				i += len(instance)
			case strings.HasPrefix(format[i:], "%s"):
				f.WriteString("%s")
				out = append(out, args[next])
				next++
				i += 2
			default:
				f.WriteByte(format[i])
				i++
			}
		}
		return `printf "` + f.String() + `" ` + strings.Join(out, " ")
	})
}

// withSelector adds the configured selector to a series selector
// (xdp_foo or xdp_foo{a="b"}).
func withSelector(series, sel string) string {
	if sel == "" {
		return series
	}
	if i := strings.IndexByte(series, '{'); i >= 0 {
		return series[:i+1] + sel + "," + series[i+1:]
	}
	return series + "{" + sel + "}"
}

// marshalRules renders a rule file with a header saying where it comes from.
func marshalRules(f RuleFile) ([]byte, error) {
	return yamlWithHeader("dashboards/rules.go", "The thresholds are dashboards/config.go's: override them with -config.", f)
}
