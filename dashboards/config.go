package dashboards

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/prometheus/common/model"
	"go.yaml.in/yaml/v3"
)

// Config holds every alert threshold in one place, as node-mixin's
// _config does. The defaults are what DefaultConfig returns; a YAML file
// with any subset of these keys overrides them:
//
//	go run ./dashboards/cmd/gen -config my-thresholds.yaml -out /tmp/rules
//
// The benchmark notes' figures quoted below come from the XDP paper's benchmark notes
// (the benchmark notes behind the XDP paper, CoNEXT 2018: mlx5 ConnectX-5,
// Xeon E5-1650 v4).
type Config struct {
	// RunbookURL is the base of every alert's runbook_url; the alert's
	// anchor (its name in lower case) is appended after '#'.
	RunbookURL string `yaml:"runbook_url"`
	// Selector selects the exporter's series in every rule, as node-mixin's
	// nodeExporterSelector does: job="xdp" by default, the job of every
	// scrape configuration in deploy/ and the tutorial's. Exact, so that an
	// unrelated job (xdp-lb, xdpfilter-probe) is not read as the
	// exporter's. The exporter-down alert watches up{Selector}.
	Selector string `yaml:"selector"`
	// ClusterLabel is the label that tells clusters apart (kubernetes-mixin's
	// clusterLabel). Recording rules aggregate by it, job and instance, so
	// series of several clusters or jobs behind one Prometheus (federation,
	// remote write) stay apart; hosts without it aggregate as before. The
	// fleet view aggregates by it too; the dashboards' $cluster variable
	// reads the label named cluster.
	ClusterLabel string `yaml:"cluster_label"`
	// RateWindow is the range of the rate() in every recording rule. Keep it
	// at least four scrape intervals.
	RateWindow string `yaml:"rate_window"`
	// Lab is the rule group the paper figures read (rules/lab.yml).
	Lab LabConfig `yaml:"lab"`

	// RXCPU decides which CPUs are "RX CPUs" (the ones processing packets),
	// which several alerts restrict themselves to.
	RXCPU RXCPUConfig `yaml:"rx_cpu"`

	NICDropsWhileIdle NICDropsConfig       `yaml:"nic_drops_while_idle"`
	RxOutOfBuffer     OutOfBufferConfig    `yaml:"rx_out_of_buffer"`
	PageCacheStarved  PageCacheConfig      `yaml:"page_cache_starved"`
	PCIeStalled       PCIeConfig           `yaml:"pcie_stalled"`
	DDIOCacheMiss     CacheMissConfig      `yaml:"ddio_cache_miss"`
	DDIOWriteMiss     CacheMissConfig      `yaml:"ddio_write_miss"`
	RSSImbalance      RSSConfig            `yaml:"rss_imbalance"`
	RXQueuesShareCPU  QueuesShareCPUConfig `yaml:"rx_queues_share_cpu"`
	ExporterDown      ExporterDownConfig   `yaml:"exporter_down"`
	Exceptions        EventConfig          `yaml:"exceptions"`
	RedirectErrors    EventConfig          `yaml:"redirect_errors"`
	DevmapDrops       EventConfig          `yaml:"devmap_drops"`
	CpumapDrops       EventConfig          `yaml:"cpumap_drops"`
	NAPIOverload      NAPIConfig           `yaml:"napi_softirq_overload"`
	ProgramNotRunning ProgramConfig        `yaml:"program_not_running"`
	CollectorFailing  CollectorFailConfig  `yaml:"collector_failing"`
	StackDrops        StackDropsConfig     `yaml:"stack_drops"`
	PCIeLinkDegraded  PCIeLinkConfig       `yaml:"pcie_link_degraded"`
	PCIeAER           PCIeAERConfig        `yaml:"pcie_aer"`
	RemoteNUMA        RemoteNUMAConfig     `yaml:"remote_numa"`
	PCIeBusy          PCIeBusyConfig       `yaml:"pcie_busy"`
	// Set-up mistakes the exported data shows (setup.go).
	GenericMode          AlertConfig `yaml:"generic_mode"`
	RedirectTargetQueues AlertConfig `yaml:"redirect_target_queues"`
	// The NIC configuration's alerts (nicconfig.go).
	PauseWhileDropping PauseConfig `yaml:"pause_while_dropping"`
	RedirectNoNdoXmit  AlertConfig `yaml:"redirect_without_ndo_xmit"`

	// RecordingRulesMissing: the exporter is up but the records the
	// alerts read are not, or are of another generation than the alerts.
	RecordingRulesMissing AlertConfig `yaml:"recording_rules_missing"`

	// Global holds the global tier's alerts (rules/global.yml).
	Global GlobalConfig `yaml:"global"`

	// Alertmanager holds the routing of deploy/alertmanager/.
	Alertmanager AlertmanagerConfig `yaml:"alertmanager"`
}

// GlobalConfig: the alerts of the global tier, which need more than one
// host's series. A device with the benchmark notes' signature (NICDropsWhileIdle's
// thresholds, read from the edge's recorded series) is one host's problem
// until FleetWideDrops.MinShare of its job's hosts, and at least
// FleetWideDrops.MinHosts, show it: then the drops are fleet-wide (an
// upstream burst, a change rolled out everywhere) and one alert says so
// instead of one per host. A collector failing on CollectorFailing.MinShare
// of the hosts is a release's or a rollout's fault, not a host's. A host
// whose up stopped arriving within HostSilent.Window no longer reaches the
// global tier (its edge Prometheus or the remote write is down).
type GlobalConfig struct {
	HostDrops        AlertConfig      `yaml:"host_drops"`
	FleetWideDrops   FleetShareConfig `yaml:"fleet_wide_drops"`
	CollectorFailing FleetShareConfig `yaml:"collector_failing"`
	HostSilent       HostSilentConfig `yaml:"host_silent"`
}

// AlertConfig is an alert's for: duration and severity.
type AlertConfig struct {
	For      string `yaml:"for"`
	Severity string `yaml:"severity"`
}

// FleetShareConfig: at least MinShare of a job's hosts, and at least
// MinHosts of them.
type FleetShareConfig struct {
	MinShare float64 `yaml:"min_host_share"`
	MinHosts int     `yaml:"min_hosts"`
	For      string  `yaml:"for"`
	Severity string  `yaml:"severity"`
	// KeepFiringFor holds a fleet alert that inhibits the hosts' alerts
	// while the incident ends on its hosts a few seconds apart.
	KeepFiringFor string `yaml:"keep_firing_for,omitempty"`
}

// HostSilentConfig: a host that sent up within Window and sends none now.
type HostSilentConfig struct {
	Window   string `yaml:"window"`
	For      string `yaml:"for"`
	Severity string `yaml:"severity"`
}

// RXCPUConfig: a CPU is an RX CPU when the rxq collector sees at least
// MinPackets packets/s on it or, without the rxq collector, when it spends
// at least MinSoftirqRatio of its time in softirq.
type RXCPUConfig struct {
	MinPackets      float64 `yaml:"min_packets_per_second"`
	MinSoftirqRatio float64 `yaml:"min_softirq_ratio"`
}

// LabConfig: the paper figures plot one point per evaluation of a sweep,
// so their group is evaluated at the lab's scrape interval with a short
// window, where the standard group's minute would smear a sweep's steps
// together. A point is drawn only while its step stands still: the count
// of active CPUs or queues equals the one a window earlier and the packet
// rate moved by at most SteadyTolerance.
type LabConfig struct {
	Interval   string `yaml:"interval"`
	RateWindow string `yaml:"rate_window"`
	// MinPackets is the rate above which a CPU or queue counts as
	// processing (stray packets do not add a core).
	MinPackets      float64 `yaml:"min_packets_per_second"`
	SteadyTolerance float64 `yaml:"steady_tolerance"`
}

// NICDropsConfig: the NIC drops for lack of host resources while the RX
// CPUs still have idle time, i.e. the host cannot take packets off the
// wire fast enough although the CPUs could process them: PCIe (or
// memory/DDIO) bottleneck. Benchmark notes: rx_discards_phy 13,760,980/s of
// rx_packets_phy 88,049,446/s (15.6%) with the six RX CPUs 37-40% idle.
type NICDropsConfig struct {
	MinDiscards  float64 `yaml:"min_discards_per_second"`
	MinRatio     float64 `yaml:"min_discard_ratio"` // of the port's received packets, where the device counts them
	MinIdleRatio float64 `yaml:"min_rx_cpu_idle_ratio"`
	For          string  `yaml:"for"`
	Severity     string  `yaml:"severity"`
}

// OutOfBufferConfig: the NIC had no RX descriptor posted (the driver did
// not refill the ring in time). Benchmark notes, XDP_REDIRECT: rx_out_of_buffer
// 43,246,222/s of 88,243,138/s (49%); benchmark notes, XDP_DROP: 93,624/s (0.1%), which
// must stay quiet.
type OutOfBufferConfig struct {
	MinDrops float64 `yaml:"min_drops_per_second"`
	MinRatio float64 `yaml:"min_drop_ratio"` // of the port's received packets, where the device counts them
	For      string  `yaml:"for"`
	Severity string  `yaml:"severity"`
}

// PageCacheConfig: page allocations miss the driver's page cache (mlx5
// rx_cache_empty vs rx_cache_reuse) or the page_pool fast path (slow vs
// fast allocations). Benchmark notes, XDP_REDIRECT: rx_cache_empty 30,362,207/s and no
// reuse; benchmark notes, XDP_DROP: rx_cache_reuse 74,194,562/s and no empty.
type PageCacheConfig struct {
	MinSlow  float64 `yaml:"min_slow_allocations_per_second"`
	MinRatio float64 `yaml:"min_slow_ratio"`
	For      string  `yaml:"for"`
	Severity string  `yaml:"severity"`
}

// PCIeConfig: mlx5 outbound_pci_stalled_rd/wr is the percent of the last
// second the NIC could not issue PCIe transactions for lack of credits;
// the driver's own *_events counter counts seconds above 30%. Benchmark notes: a
// saturated XDP_DROP run showed outbound_pci_stalled_wr 4 (4%), quiet.
type PCIeConfig struct {
	MaxAvgRatio       float64 `yaml:"max_avg_stalled_ratio"`          // averaged over Window
	MaxStalledSeconds float64 `yaml:"max_stalled_seconds_per_second"` // rate of *_events
	Window            string  `yaml:"window"`
	For               string  `yaml:"for"`
	Severity          string  `yaml:"severity"`
}

// CacheMissConfig: last-level cache misses per reference on an RX CPU.
// With DDIO, packet data should be in LLC; misses mean the RX rings hold
// more memory than DDIO's share of LLC. Benchmark notes, XDP_DROP --read, RXQ=4, ring
// 1024: CPU 3 at 21.4% (IPC 1.54), CPU 0 at 0.42% (IPC 2.79); XDP_TX with
// ring 256 stayed below 1.4% up to 6 queues.
type CacheMissConfig struct {
	MaxRatio      float64 `yaml:"max_miss_ratio"`
	MinReferences float64 `yaml:"min_references_per_second"`
	For           string  `yaml:"for"`
	Severity      string  `yaml:"severity"`
}

// RSSConfig: one RX queue of a device receives more than MaxOverMean
// times the mean of the device's busy queues (at least MinQueuePackets/s).
// The i40e RSS example: five queues at 180 kpps and one at 907 kpps, 3.0x the mean;
// the balanced six-queue runs of the paper's mlx5 runs are within 1.01x. The RXQ=4
// XDP_DROP --read run (queues at 21.6, 21.6, 12.7, 12.3 Mpps, 1.27x) is
// DDIO cache misses slowing two CPUs, not RSS: it must stay quiet here
// and fire XDPDDIOCacheMissHigh.
type RSSConfig struct {
	MaxOverMean float64 `yaml:"max_over_mean"`
	// UnevenTableWeight: a hot queue whose RSS indirection weight (its
	// table entries over an even share) is above it is the table's doing,
	// in the alert's description.
	UnevenTableWeight float64 `yaml:"uneven_table_weight"`
	MinQueues         int     `yaml:"min_busy_queues"`
	MinQueuePackets   float64 `yaml:"min_queue_packets_per_second"`
	For               string  `yaml:"for"`
	Severity          string  `yaml:"severity"`
}

// PauseConfig: pause frames above MinPauseFrames/s (over Window) in
// either direction while the port drops more than MinDrops packets/s for
// lack of host resources.
type PauseConfig struct {
	MinPauseFrames float64 `yaml:"min_pause_frames_per_second"`
	MinDrops       float64 `yaml:"min_drops_per_second"`
	Window         string  `yaml:"window"`
	For            string  `yaml:"for"`
	Severity       string  `yaml:"severity"`
}

// QueuesShareCPUConfig: one CPU processes MinQueues or more busy RX queues
// of a device (each above MinQueuePackets/s) while the host has at least
// as many CPUs as the device has busy queues, so the sharing is an IRQ
// affinity choice, not a shortage. The i40e RSS example: queues 0, 1, 3, 4, 5 all on
// CPU 0 while queue 2 has CPU 2 to itself.
type QueuesShareCPUConfig struct {
	MinQueues       int     `yaml:"min_queues"`
	MinQueuePackets float64 `yaml:"min_queue_packets_per_second"`
	For             string  `yaml:"for"`
	Severity        string  `yaml:"severity"`
}

// ExporterDownConfig: Prometheus cannot scrape the exporter (up == 0), or
// has no target of the selector at all.
type ExporterDownConfig struct {
	For      string `yaml:"for"`
	Severity string `yaml:"severity"`
}

// EventConfig is for counters that should stay at zero: the alert fires
// when their rate over Window exceeds MaxPerSecond.
type EventConfig struct {
	MaxPerSecond float64 `yaml:"max_per_second"`
	Window       string  `yaml:"window"`
	For          string  `yaml:"for"`
	Severity     string  `yaml:"severity"`
}

// NAPIConfig: most NAPI polls use their whole budget and a real share of
// them runs from ksoftirqd, i.e. softirq processing was deferred to the
// scheduler: overload. Benchmark notes, napi_monitor: 81% of polls exhausted the
// budget of 64 but only 0.96% ran in ksoftirqd: busy, not overloaded.
type NAPIConfig struct {
	MinExhaustedRatio float64 `yaml:"min_budget_exhausted_ratio"`
	MinKsoftirqdRatio float64 `yaml:"min_ksoftirqd_ratio"`
	For               string  `yaml:"for"`
	Severity          string  `yaml:"severity"`
}

// StackDropsConfig: the stack drops packets on a device for a reason that
// means the host is overloaded (its backlog, a socket's receive buffer or
// a listen queue is full, protocol memory is exhausted) or misconfigured
// (no socket listens, a netfilter rule drops): more than MinPerSecond of
// one of Reasons (kernel drop reason names, as the drop collector labels
// them) over Window, sustained for For. Needs --collector.drop.
type StackDropsConfig struct {
	Reasons      []string `yaml:"reasons"`
	MinPerSecond float64  `yaml:"min_per_second"`
	Window       string   `yaml:"window"`
	For          string   `yaml:"for"`
	Severity     string   `yaml:"severity"`
}

// PCIeLinkConfig: a NIC's PCIe link, or a link above it, trained below
// what both its ends can do (xdp_pcie_link_degraded) for For: a card in
// a riser or slot that lost lanes, or a link that retrained at a lower
// speed after errors.
type PCIeLinkConfig struct {
	For      string `yaml:"for"`
	Severity string `yaml:"severity"`
}

// PCIeAERConfig: any uncorrectable (non-fatal or fatal) AER error of a
// NIC's function in Window, and correctable ones above
// MaxCorrectablePerSecond over Window for CorrectableFor. Correctable
// errors are retried by the link layer and cost bandwidth; a steady flow
// of them precedes link retraining.
type PCIeAERConfig struct {
	Window                  string  `yaml:"window"`
	MaxCorrectablePerSecond float64 `yaml:"max_correctable_per_second"`
	CorrectableFor          string  `yaml:"correctable_for"`
	Severity                string  `yaml:"severity"`
	UncorrectableSeverity   string  `yaml:"uncorrectable_severity"`
}

// RemoteNUMAConfig: more than MaxRemoteRatio of a NIC's packets are
// processed on CPUs of another NUMA node than the NIC's (XDP packets by
// the rxq collector's per-CPU counts, NIC RX by the per-queue qstats and
// the node of each queue's IRQ CPUs), for For. DDIO writes packets into
// the last-level cache of the NIC's socket; a CPU of the other socket
// misses on every one.
type RemoteNUMAConfig struct {
	MaxRemoteRatio float64 `yaml:"max_remote_ratio"`
	MinPackets     float64 `yaml:"min_packets_per_second"`
	For            string  `yaml:"for"`
	Severity       string  `yaml:"severity"`
}

// PCIeBusyConfig: the estimated PCIe traffic of a NIC (PCIeModel applied
// to its qstats byte and packet rates) above MaxUseRatio of the
// narrowest link on its path, in either direction, for For.
type PCIeBusyConfig struct {
	MaxUseRatio float64   `yaml:"max_use_ratio"`
	For         string    `yaml:"for"`
	Severity    string    `yaml:"severity"`
	Model       PCIeModel `yaml:"model"`
}

// PCIeModel is the per-packet PCIe overhead model of the estimate, after
// Neugebauer et al., "Understanding PCIe performance for end host
// networking" (SIGCOMM 2018): every packet's data moves in TLPs of at
// most MaxPayloadBytes, each with TLPOverheadBytes of header, sequence
// number, LCRC and framing; every packet also costs a descriptor read
// (DescriptorBytes, host to device) and a completion write
// (CompletionBytes, device to host), each a TLP of its own. Batching and
// CQE compression lower the last two: the estimate is an upper bound.
type PCIeModel struct {
	TLPOverheadBytes float64 `yaml:"tlp_overhead_bytes"`
	MaxPayloadBytes  float64 `yaml:"max_payload_bytes"`
	DescriptorBytes  float64 `yaml:"descriptor_bytes"`
	CompletionBytes  float64 `yaml:"completion_bytes"`
}

// ProgramConfig: an attached XDP program whose run count does not move
// while its device receives MinPackets packets/s. Only evaluated while
// BPF run-time statistics are on (xdp_bpf_stats_enabled == 1).
type ProgramConfig struct {
	MinPackets float64 `yaml:"min_device_packets_per_second"`
	Window     string  `yaml:"window"`
	For        string  `yaml:"for"`
	Severity   string  `yaml:"severity"`
}

// CollectorFailConfig: a collector reports xdp_scrape_collector_success 0.
// A collector the host cannot support (no BTF, no hardware counters in a
// VM) reports 0 forever: list it in IgnoredCollectors or disable it with
// --no-collector.NAME.
type CollectorFailConfig struct {
	IgnoredCollectors []string `yaml:"ignored_collectors"`
	For               string   `yaml:"for"`
	Severity          string   `yaml:"severity"`
}

// DefaultConfig returns the shipped thresholds (the ones in rules/*.yml).
func DefaultConfig() Config {
	return Config{
		RunbookURL: "https://github.com/xdp-exporter/xdp_exporter/blob/main/docs/runbook.md",
		RateWindow: "1m",
		// Four scrapes of the lab's Prometheus (scrape_interval 1s).
		Lab:          LabConfig{Interval: "1s", RateWindow: "4s", MinPackets: 1000, SteadyTolerance: 0.05},
		Selector:     `job="xdp"`,
		ClusterLabel: "cluster",
		RXCPU:        RXCPUConfig{MinPackets: 1000, MinSoftirqRatio: 0.05},
		// 1% of the port's packets and 10k/s: the benchmark notes' PCIe case is 15.6%;
		// idle above 20% leaves no doubt the CPUs are not the limit.
		NICDropsWhileIdle: NICDropsConfig{MinDiscards: 10000, MinRatio: 0.01, MinIdleRatio: 0.2, For: "5m", Severity: "warning"},
		// 1%: the benchmark notes' healthy XDP_DROP run loses 0.1%, the REDIRECT run 49%.
		RxOutOfBuffer: OutOfBufferConfig{MinDrops: 10000, MinRatio: 0.01, For: "5m", Severity: "warning"},
		// Half the allocations missing the recycle path.
		PageCacheStarved: PageCacheConfig{MinSlow: 10000, MinRatio: 0.5, For: "10m", Severity: "warning"},
		// 30% is where mlx5 itself counts a stalled second.
		PCIeStalled: PCIeConfig{MaxAvgRatio: 0.3, MaxStalledSeconds: 0.5, Window: "5m", For: "5m", Severity: "warning"},
		// 10%: the benchmark notes' XDP_TX ring-1024 run lost throughput from 11.8% on.
		DDIOCacheMiss: CacheMissConfig{MaxRatio: 0.1, MinReferences: 1e6, For: "10m", Severity: "warning"},
		// The measured DDIO alert: the share of the device's full-line
		// writes that missed the LLC (uncore CHA), above MaxRatio while at
		// least MinReferences writes a second arrive. A fifth missing is
		// a starting point, not a measured edge: with DDIO working, RX
		// writes allocate in the LLC and nearly all hit.
		DDIOWriteMiss: CacheMissConfig{MaxRatio: 0.2, MinReferences: 1e6, For: "10m", Severity: "warning"},
		// 1.5x: above the DDIO run's 1.27x, well below the i40e RSS example's 3.0x.
		RSSImbalance:      RSSConfig{MaxOverMean: 1.5, UnevenTableWeight: 1.5, MinQueues: 2, MinQueuePackets: 1000, For: "15m", Severity: "warning"},
		RXQueuesShareCPU:  QueuesShareCPUConfig{MinQueues: 2, MinQueuePackets: 1000, For: "15m", Severity: "warning"},
		ExporterDown:      ExporterDownConfig{For: "5m", Severity: "warning"},
		Exceptions:        EventConfig{MaxPerSecond: 0, Window: "5m", For: "2m", Severity: "warning"},
		RedirectErrors:    EventConfig{MaxPerSecond: 0, Window: "5m", For: "2m", Severity: "warning"},
		DevmapDrops:       EventConfig{MaxPerSecond: 0, Window: "5m", For: "2m", Severity: "warning"},
		CpumapDrops:       EventConfig{MaxPerSecond: 0, Window: "5m", For: "2m", Severity: "warning"},
		NAPIOverload:      NAPIConfig{MinExhaustedRatio: 0.5, MinKsoftirqdRatio: 0.1, For: "10m", Severity: "warning"},
		ProgramNotRunning: ProgramConfig{MinPackets: 100, Window: "5m", For: "10m", Severity: "warning"},
		CollectorFailing:  CollectorFailConfig{For: "15m", Severity: "info"},
		StackDrops: StackDropsConfig{
			Reasons: []string{"CPU_BACKLOG", "SOCKET_BACKLOG", "SOCKET_RCVBUFF", "TCP_LISTEN_OVERFLOW", "PROTO_MEM",
				"NO_SOCKET", "NETFILTER_DROP"},
			MinPerSecond: 100, Window: "5m", For: "10m", Severity: "warning",
		},
		PCIeLinkDegraded: PCIeLinkConfig{For: "10m", Severity: "warning"},
		PCIeAER: PCIeAERConfig{Window: "10m", MaxCorrectablePerSecond: 1, CorrectableFor: "10m",
			Severity: "warning", UncorrectableSeverity: "critical"},
		RemoteNUMA: RemoteNUMAConfig{MaxRemoteRatio: 0.1, MinPackets: 1000, For: "10m", Severity: "warning"},
		PCIeBusy: PCIeBusyConfig{MaxUseRatio: 0.8, For: "10m", Severity: "warning",
			Model: PCIeModel{TLPOverheadBytes: 24, MaxPayloadBytes: 256, DescriptorBytes: 16, CompletionBytes: 64}},
		GenericMode:          AlertConfig{For: "10m", Severity: "warning"},
		RedirectTargetQueues: AlertConfig{For: "5m", Severity: "warning"},
		PauseWhileDropping:   PauseConfig{MinPauseFrames: 1, MinDrops: 1000, Window: "5m", For: "5m", Severity: "warning"},
		RedirectNoNdoXmit:    AlertConfig{For: "5m", Severity: "warning"},
		// Records appear at the rule group's first evaluation after a load.
		RecordingRulesMissing: AlertConfig{For: "10m", Severity: "warning"},
		Global: GlobalConfig{
			// Longer than the edge alert's for: where the edge's alert
			// reaches Alertmanager it fires first and inhibits this one.
			HostDrops: AlertConfig{For: "10m", Severity: "warning"},
			// Half the hosts: one host dropping in a job of two is still
			// that host's problem. Shorter than the hosts' alerts' for, so
			// that it fires first and inhibits them: one page, not one a
			// host.
			FleetWideDrops: FleetShareConfig{MinShare: 0.5, MinHosts: 2, For: "3m", Severity: "critical", KeepFiringFor: "5m"},
			// A tenth of the hosts, and two: one host is XDPExporterCollectorFailing's.
			CollectorFailing: FleetShareConfig{MinShare: 0.1, MinHosts: 2, For: "15m", Severity: "warning"},
			HostSilent:       HostSilentConfig{Window: "1h", For: "5m", Severity: "warning"},
		},
		Alertmanager: AlertmanagerConfig{
			PageURL:   "http://pager.example.net/xdp",
			TicketURL: "http://tickets.example.net/xdp",
			GroupWait: "30s", GroupInterval: "5m", RepeatInterval: "4h",
			Templates: "/etc/alertmanager/templates/xdp.tmpl",
		},
	}
}

// fleetLabels tell the fleets (clusters and jobs) apart: what the global
// tier's roll-ups keep.
func (c Config) fleetLabels() string {
	if c.ClusterLabel == "" {
		return "job"
	}
	return c.ClusterLabel + ", job"
}

// hostLabels are the labels that identify one exporter: what recording
// rules keep and alerts join on.
func (c Config) hostLabels() string {
	if c.ClusterLabel == "" {
		return "job, instance"
	}
	return c.ClusterLabel + ", job, instance"
}

// LoadConfig reads a YAML override file on top of DefaultConfig. Unknown
// keys are an error, so a typo does not silently keep a default.
func LoadConfig(path string) (Config, error) {
	cfg := DefaultConfig()
	b, err := os.ReadFile(path)
	if err != nil {
		return cfg, err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		return cfg, fmt.Errorf("%s: %w", path, err)
	}
	for _, d := range []struct{ key, value string }{
		{"rate_window", cfg.RateWindow}, {"lab.interval", cfg.Lab.Interval}, {"lab.rate_window", cfg.Lab.RateWindow},
	} {
		if _, err := model.ParseDuration(d.value); err != nil {
			return cfg, fmt.Errorf("%s: %s: %w", path, d.key, err)
		}
	}
	return cfg, nil
}
