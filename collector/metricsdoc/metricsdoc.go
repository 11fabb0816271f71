// Command metricsdoc renders the collectors' catalogue of families as
// METRICS.md (make generate): names, types, labels, help, and how many
// series each sends per scrape.
package main

//go:generate go run . ../../METRICS.md

import (
	"cmp"
	"fmt"
	"os"

	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/xdp-exporter/xdp_exporter/collector"
)

// registrations are the collectors by name.
var registrations = func() map[string]collector.Registration {
	out := map[string]collector.Registration{}
	for _, r := range collector.Registrations() {
		out[r.Name] = r
	}
	return out
}()

// anchored compiles a flag's regexp as the collectors match it: against
// the whole name.
func anchored(re string) *regexp.Regexp { return regexp.MustCompile("^(?:" + re + ")$") }

// deviceLabelDoc is the label and filter policy of the collectors' device
// labels, as users read it.
const deviceLabelDoc = `
## Devices

Every scrape takes one dump of the exporter's network namespace's
interfaces (RTM_GETLINK) and every collector names devices from it, so a
device has one label value in every family of that scrape.

- **device** is the interface name. A byte that is not UTF-8 (Linux allows
  any byte in a name but '/', ':' and white space) is written ` + "`\\xNN`" + `.
- A device the exporter cannot name (gone since its counters were
  recorded, or created after the scrape's dump) is ` + "`ifindex:N`" + `.
- A device of another network namespace, which only the BPF programs of
  the monitor and napi collectors see, is ` + "`netns:INODE/NAME`" + ` where the program
  recorded the name (napi) and ` + "`netns:INODE/ifindex:N`" + ` where it does not
  (monitor); INODE is the namespace's inode as ` + "`lsns -t net`" + ` shows it.
- ` + "`--collector.NAME.device-include/-exclude`" + ` (every collector with a
  device label) are regexps matched against the whole device label
  (` + "`eth0`" + ` does not select ` + "`veth0`" + `): include first (empty: every device),
  then exclude.
- The series column says how many series a family sends per scrape, and
  what the default flags change (docs/cardinality.md).
- The monitor and napi collectors delete the kernel map entries of devices,
  programs and cpumaps that are gone (the device is absent from the
  dump after a scrape that saw its entry, the id no longer opens), so
  their series end and the maps keep room for new ones. Devices of
  another namespace cannot be checked from here: their entries go after
  10 minutes without counting, and count from zero if the device comes
  back.
`

// writeGlossary writes the meaning of every label name, one per name in
// every family (collector/labels.go), with the families that have it.
func writeGlossary(b *strings.Builder) {
	has := map[string][]string{}
	for _, f := range collector.Catalogue() {
		for _, l := range f.Labels {
			has[l] = append(has[l], f.Name)
		}
	}
	b.WriteString("\n## Labels\n\nA label name means one thing in every family that has it. A label the kernel gives no value for is left out of the series, " +
		"as Prometheus stores an empty label: `{napi_id=\"\"}` selects the series without one.\n\n" +
		"| label | meaning | values | families |\n|---|---|---|---|\n")
	for _, l := range collector.Glossary() {
		values := "any"
		if l.Values != "" {
			values = "`" + strings.ReplaceAll(l.Values, "|", "\\|") + "`"
		}
		fams := has[l.Name]
		families := strconv.Itoa(len(fams))
		if len(fams) <= 3 {
			families = "`" + strings.Join(fams, "`, `") + "`"
		}
		b.WriteString("| " + l.Name + " | " + strings.ReplaceAll(l.Meaning, "|", "\\|") + " | " + values + " | " + families + " |\n")
	}
}

// Markdown renders the catalogue as the body of METRICS.md.
func Markdown() string {
	var b strings.Builder
	b.WriteString("# Metrics\n\n")
	b.WriteString("Generated from the code by `make generate`; a test fails when this file drifts.\n")
	b.WriteString(deviceLabelDoc)
	writeGlossary(&b)
	byCollector := map[string][]*collector.Family{}
	var names []string
	for _, f := range collector.Catalogue() {
		c := f.Collector
		if c == "" {
			c = "exporter"
		}
		if _, ok := byCollector[c]; !ok {
			names = append(names, c)
		}
		byCollector[c] = append(byCollector[c], f)
	}
	sort.Strings(names)
	for _, c := range names {
		b.WriteString("\n## " + c + "\n\n")
		if r, ok := registrations[c]; ok {
			state := "off by default"
			if r.DefaultEnabled {
				state = "on by default"
			}
			b.WriteString(r.Help + " (`--collector." + c + "`, " + state + ")\n\n")
			if r.Requires != "" {
				b.WriteString("Requires: " + r.Requires + "\n\n")
			}
		}
		b.WriteString("| name | type | stability | labels | series | meaning |\n|---|---|---|---|---|---|\n")
		for _, f := range byCollector[c] {
			labels := strings.Join(f.Labels, ", ")
			help := strings.ReplaceAll(cmp.Or(f.Doc, f.Help), "|", "\\|")
			series := seriesFormula(f)
			if d := defaultShape(f); d != "" {
				series += "; " + d
			}
			b.WriteString("| `" + f.Name + "` | " + string(f.Type) + " | " + string(f.Stability) + " | " + labels + " | " + series + " | " + help + " |\n")
		}
	}
	return b.String()
}

// labelFactor is what a label multiplies a family's series by, in the
// words METRICS.md uses. A label absent here describes the series' key
// (an IRQ, a PID, a driver version) and adds none.
var labelFactor = map[string]string{
	"collector":   "collectors",
	"device":      "devices",
	"from_device": "devices",
	"to_device":   "devices",
	"queue":       "queues",
	"cpu":         "CPUs",
	"to_cpu":      "CPUs",
	"napi_id":     "NAPIs (about one per channel)",
	"pool_id":     "page pools (about one per RX queue)",
	"hop":         "PCIe hops",
	"inode":       "AF_XDP sockets",
	"prog_id":     "programs",
	"map_id":      "cpumaps",
	"map":         "6 maps",
	"tracepoint":  "tracepoints",
	"context":     "4 contexts",
	"event":       "5 events",
	"path":        "6 paths",
	"result":      "5 results",
	"direction":   "2 directions",
	"ring":        "2 rings",
	"size":        "frame sizes",
	"flag":        "private flags",
	"source":      "2 sources",
	"group":       "perf groups",
	"errno":       "errnos",
	"reason":      "reasons",
	"action":      "actions",
	"feature":     "features",
	"vector":      "vectors",
	"mode":        "8 modes",
	"channel":     "channel types",
	"class":       "3 classes",
	"op":          "2 ops",
	"error":       "error names",
}

// seriesOverride gives the series of a family whose labels do not tell
// it by themselves: a label whose values are fixed by the family, or one
// that describes rather than multiplies.
var seriesOverride = map[string]string{
	"xdp_bpf_prog_info":                        "attachments (device x attach mode)",
	"xdp_bpf_prog_runs_total":                  "programs",
	"xdp_bpf_tc_prog_info":                     "programs on the tc, tcx and netkit hooks of the devices (device x kind x hook)",
	"xdp_bpf_dispatcher_component_info":        "components of libxdp's dispatchers (up to 10 per dispatcher)",
	"xdp_bpf_prog_run_seconds_total":           "programs",
	"xdp_cpu_softirqs_total":                   "CPUs x 2 vectors (NET_RX, NET_TX; 10 with --collector.cpu.softirqs.all)",
	"xdp_napi_softirq_entries_total":           "CPUs that ran a softirq x 10 vectors (--collector.napi.softirq-vectors)",
	"xdp_napi_softirq_raises_total":            "CPUs that ran a softirq x 10 vectors (--collector.napi.softirq-vectors)",
	"xdp_napi_softirq_seconds_total":           "CPUs that ran a softirq x 10 vectors (--collector.napi.softirq-vectors)",
	"xdp_napi_poll_work":                       "devices x contexts polled x 68 (65 buckets, +Inf, _sum, _count)",
	"xdp_napi_polls_budget_exhausted_total":    "devices x contexts polled",
	"xdp_napi_polls_over_budget_total":         "devices x contexts polled",
	"xdp_nic_channels":                         "devices x channel types the driver has (rx, tx, other, combined)",
	"xdp_nic_channels_max":                     "devices x channel types the driver has (rx, tx, other, combined)",
	"xdp_nic_driver_info":                      "devices",
	"xdp_nic_port_packets_total":               "devices with port counters x 2 directions (one source per device)",
	"xdp_nic_port_bytes_total":                 "devices with port counters x 2 directions (one source per device)",
	"xdp_nic_rx_host_drops_total":              "devices x the places the device's one source tells apart (mlx5: port and ring; an unknown driver: 1)",
	"xdp_nic_rx_alloc_failures_total":          "devices with an allocation-failure counter",
	"xdp_nic_signal_source_info":               "one per series of the four NIC signal families",
	"xdp_netdev_irq_affinity_info":             "IRQs of the devices' queues",
	"xdp_nic_allowance_exceeded_packets_total": "ENA devices x 5 allowances",
	"xdp_nic_rx_xdp_packets_total":             "devices x RX queues x verdicts the driver counts (mlx5: drop, redirect, tx)",
	"xdp_nic_rx_xdp_tx_failures_total":         "devices x RX queues x 2 reasons",
	"xdp_nic_xdp_xmit_failures_total":          "devices x TX queues x 2 reasons",
	"xdp_netdev_queue_info":                    "devices x (RX + TX queues)",
	"xdp_netdev_napi_info":                     "NAPIs (about one per channel)",
	"xdp_monitor_devmap_xmit_packets_total":    "(from, to) device pairs redirected between",
	"xdp_monitor_devmap_xmit_drops_total":      "(from, to) device pairs redirected between",
	"xdp_monitor_devmap_xmit_errors_total":     "(from, to) device pairs redirected between",
	"xdp_monitor_devmap_xmit_bulks_total":      "(from, to) device pairs redirected between",
	"xdp_netdev_xdp_feature":                   "devices x 7 features (and any bit a newer kernel adds)",
	"xdp_netdev_xdp_rx_metadata_feature":       "devices x 3 features",
	"xdp_netdev_xsk_feature":                   "devices x 3 features",
	"xdp_pcie_device_info":                     "PCI NICs",
	"xdp_pcie_aer_errors_total":                "PCI NICs x hops with AER x 42 error names (8 correctable, 17 nonfatal, 17 fatal on Linux 6.x)",
	"xdp_pcie_link_degraded":                   "PCI NICs x links (every other hop)",
	"xdp_pcie_rx_queue_numa_remote_ratio":      "PCI NICs on a NUMA node x RX queues",
	"xdp_pcie_cpu_info":                        "CPUs, on hosts of more than one node with a PCI NIC on a node",
	"xdp_rxq_info":                             "devices",
	"xdp_rxq_observed_info":                    "attachments (device x attach mode)",
	"xdp_rxq_unobservable_info":                "attachments (device x attach mode) observe mode cannot count",
	"xdp_rxq_packets_total":                    "devices x queues x CPUs x verdicts seen (a cell at its first packet)",
	"xdp_rxq_bytes_total":                      "devices x queues x CPUs x verdicts seen (a cell at its first packet)",
	"xdp_rxq_issues_total":                     "devices x reasons seen",
	"xdp_drop_packets_total":                   "devices x drop reasons seen",
	"xdp_monitor_cpumap_kthread_actions_total": "cpumaps x CPUs x 3 actions",
	"xdp_monitor_exceptions_total":             "devices x actions seen",
	"xdp_monitor_redirect_errors_total":        "devices x errnos seen",
	"xdp_xsk_ring_entries":                     "AF_XDP sockets x 4 rings (device and queue name the socket)",
	"xdp_perf_event_available":                 "perf events",
}

// seriesFormula is the number of series a family sends per scrape, as a
// product of what its labels range over.
func seriesFormula(f *collector.Family) string {
	if s, ok := seriesOverride[f.Name]; ok {
		return s
	}
	var parts []string
	seen := map[string]bool{}
	for _, l := range f.Labels {
		factor, ok := labelFactor[l]
		// queue, direction: a netdev queue's direction is part of its name.
		if !ok || seen[factor] || l == "direction" && seen["queues"] {
			continue
		}
		seen[factor] = true
		// An AF_XDP socket, a page pool and a NAPI each belong to one
		// device (and a socket to one queue): they count alone.
		switch l {
		case "inode":
			parts = slices.DeleteFunc(parts, func(p string) bool { return p == "devices" || p == "queues" })
		case "pool_id":
			parts = slices.DeleteFunc(parts, func(p string) bool { return p == "devices" })
		case "napi_id":
			parts = slices.DeleteFunc(parts, func(p string) bool { return p == "devices" })
			if seen[labelFactor["pool_id"]] {
				continue // the pool's NAPI
			}
		}
		parts = append(parts, factor)
	}
	switch {
	case len(parts) == 0:
		return "1"
	case f.Type == collector.Histogram:
		parts = append(parts, "(buckets + 3)")
	}
	return strings.Join(parts, " x ")
}

// defaultShape says what the default flags do to a family: not built
// (the collector's default metrics-exclude), summed per device (ethtool's
// sum-queues), or nothing.
func defaultShape(f *collector.Family) string {
	if exclude := registrations[f.Collector].MetricsExclude; exclude != "" && anchored(exclude).MatchString(f.ShortName()) {
		return "off by default (`--collector." + f.Collector + ".metrics-exclude`)"
	}
	if f.Collector == "nic" && anchored(collector.DefaultEthtoolSumQueues).MatchString(f.ShortName()) {
		return "summed per device by default, queue=\"\" (`--collector.nic.sum-queues`)"
	}
	return ""
}

func main() {
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: metricsdoc METRICS.md")
		os.Exit(2)
	}
	if err := os.WriteFile(os.Args[1], []byte(Markdown()), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "metricsdoc:", err)
		os.Exit(1)
	}
}
