package collector

import (
	"log/slog"
	"regexp"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/netdev"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
)

func TestFamilyShortName(t *testing.T) {
	for fam, want := range map[*Family]string{
		netdevQueueInfo:      "queue_info",
		softnetDropped:       "softnet_dropped_total",
		xdpExceptions:        "exceptions_total",
		softirqEntries:       "softirq_entries_total",
		ethtoolPagePoolAlloc: "rx_page_pool_allocations_total",
	} {
		if got := fam.ShortName(); got != want {
			t.Errorf("%s: ShortName %q, want %q", fam.Name, got, want)
		}
	}
}

func TestFamilyFilter(t *testing.T) {
	re := regexp.MustCompile
	f, err := newFamilyFilter("netdev", nil, re("page_pool_.*"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !f.keeps(netdevQueueInfo) || f.keeps(netdevPagePoolInflight) || f.keeps(netdevPagePoolAllocs) {
		t.Error("metrics-exclude page_pool_.* kept a page pool family or dropped queue_info")
	}
	f, err = newFamilyFilter("netdev", re("queue_info|page_pool_.*"), re("page_pool_detached"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if !f.keeps(netdevQueueInfo) || !f.keeps(netdevPagePoolInflight) || f.keeps(netdevPagePoolDetached) || f.keeps(netdevNapiInfo) {
		t.Error("include then exclude decided wrong")
	}
	// Anchored: "queue" alone names no family.
	if _, err := newFamilyFilter("netdev", nil, re("queue"), nil); err == nil || !strings.Contains(err.Error(), "--collector.netdev.metrics-exclude") {
		t.Errorf("an exclude that matches no family: err %v", err)
	}
	if _, err := newFamilyFilter("cpu", re("bogus"), nil, nil); err == nil || !strings.Contains(err.Error(), "--collector.cpu.metrics-include") {
		t.Errorf("an include that matches no family: err %v", err)
	}
	// Untyped ethtool stats are named at run time: any regexp may match.
	if _, err := newFamilyFilter("nic", nil, re("stat_rx_vport_.*"), nil); err != nil {
		t.Error(err)
	}
	var zero familyFilter
	if !zero.keeps(netdevQueueInfo) {
		t.Error("the zero filter dropped a family")
	}
}

// TestHostFlagDefaults: the whole-host test builds ethtool and netdev with
// the flags the command line gives (commandLineHostFlags) and every other
// default collector without a filter, so no other default collector may
// have a filter flag with a default.
func TestHostFlagDefaults(t *testing.T) {
	app := kingpin.New("test", "")
	AddFlags(app)
	for _, r := range Registrations() {
		if !r.DefaultEnabled {
			continue
		}
		for _, flag := range []string{"metrics-include", "metrics-exclude", "device-include", "device-exclude"} {
			f := app.GetFlag("collector." + r.Name + "." + flag)
			if f == nil {
				if flag == "metrics-exclude" || flag == "metrics-include" || r.Name != "cpu" {
					t.Errorf("default collector %s has no --collector.%s.%s", r.Name, r.Name, flag)
				}
				continue
			}
			if r.Name == "nic" || r.Name == "netdev" {
				continue
			}
			if d := f.Model().Default; len(d) != 1 || d[0] != "" {
				t.Errorf("--collector.%s.%s defaults to %q; the whole-host test builds %s without it", r.Name, flag, d, r.Name)
			}
		}
	}
}

// TestValidateFamilyFlags rejects, before anything is built, a
// metrics-exclude that names no family of an enabled collector, and lets
// one of a disabled collector pass to the disabled-collector check.
func TestValidateFamilyFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--collector.netdev.metrics-exclude=page_pool"}, "--collector.netdev.metrics-exclude matches none"},
		{[]string{"--collector.napi.metrics-include=poll_work"}, ""},
		{[]string{"--collector.perf.metrics-exclude=bogus"}, "collector perf is disabled"},
	} {
		app := kingpin.New("test", "")
		s := AddFlags(app)
		if _, err := app.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		err := s.Validate()
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%v: %v", c.args, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%v: err %v, want %q", c.args, err, c.want)
		}
	}
}

// TestMetricsExcludeExtra: --collector.netdev.metrics-exclude-extra adds
// families to the default exclude without repeating it, and a typo in it
// is refused even though the default matches families.
func TestMetricsExcludeExtra(t *testing.T) {
	app := kingpin.New("test", "")
	s := AddFlags(app)
	if _, err := app.Parse([]string{"--collector.netdev.metrics-exclude-extra=queue_info|irq_affinity_info"}); err != nil {
		t.Fatal(err)
	}
	f, err := s.flags["netdev"].filter()
	if err != nil {
		t.Fatal(err)
	}
	if f.Families.keeps(netdevQueueInfo) || f.Families.keeps(netdevIRQAffinity) || f.Families.keeps(netdevPagePoolAllocs) || f.Families.keeps(netdevNapiInfo) {
		t.Error("queue_info or irq_affinity_info (the extra), page_pool_allocations_total or napi_info (the default) was kept")
	}
	if !f.Families.keeps(netdevPagePoolInflight) {
		t.Error("page_pool_inflight, in neither the default nor the extra, was dropped")
	}
	app = kingpin.New("test", "")
	s = AddFlags(app)
	if _, err := app.Parse([]string{"--collector.netdev.metrics-exclude-extra=queue"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Validate(); err == nil || !strings.Contains(err.Error(), "--collector.netdev.metrics-exclude-extra matches none") {
		t.Errorf("an extra exclude that matches no family: err %v", err)
	}
	for _, r := range Registrations() {
		if has := app.GetFlag("collector."+r.Name+".metrics-exclude-extra") != nil; has != (r.MetricsExclude != "") {
			t.Errorf("collector %s: metrics-exclude-extra %v, default exclude %q", r.Name, has, r.MetricsExclude)
		}
	}
}

// TestEthtoolSumQueues sums the per-queue series of the families
// sum-queues names into one per device without a queue label, equal to the sum of
// the per-queue ones, and leaves the other families per queue.
func TestEthtoolSumQueues(t *testing.T) {
	src := hostEthtool(t)
	perQueue := gather(t, newEthtoolCollector(EthtoolConfig{}, src, slog.New(slog.DiscardHandler)))
	summed := gather(t, newEthtoolCollector(EthtoolConfig{SumQueues: regexp.MustCompile(DefaultEthtoolSumQueues)}, src, slog.New(slog.DiscardHandler)))
	for _, fam := range []*Family{ethtoolPagePoolAlloc, ethtoolPagePoolRecycle, ethtoolXDPXmitFail, ethtoolPageCache} {
		want := map[string]float64{}
		for _, m := range perQueue[fam.Name].GetMetric() {
			want[labelsWithout(m, "queue")] += exportertest.Value(m)
		}
		got := summed[fam.Name].GetMetric()
		if len(got) == 0 || len(got) != len(want) {
			t.Fatalf("%s: %d summed series, want %d", fam.Name, len(got), len(want))
		}
		for _, m := range got {
			if q := exportertest.Label(m, "queue"); q != "" {
				t.Errorf("%s: summed series has queue %q", fam.Name, q)
			}
			if k := labelsWithout(m, "queue"); exportertest.Value(m) != want[k] || want[k] == 0 {
				t.Errorf("%s{%s} = %v, the queues sum to %v", fam.Name, k, exportertest.Value(m), want[k])
			}
		}
	}
	for _, fam := range []*Family{ethtoolRxXDP, ethtoolRxXDPTxFail} {
		if a, b := len(summed[fam.Name].GetMetric()), len(perQueue[fam.Name].GetMetric()); a != b || a < hostQueues {
			t.Errorf("%s: %d series with sum-queues, %d without: it must stay per queue", fam.Name, a, b)
		}
	}
}

// TestNetdevExcludedDumpNotMade: with every page pool statistic family
// excluded, the collector does not ask the kernel for them at all.
func TestNetdevExcludedDumpNotMade(t *testing.T) {
	for _, exclude := range []string{"", DefaultNetdevMetricsExclude} {
		fams, err := newFamilyFilter("netdev", nil, regexp.MustCompile(exclude), nil)
		if err != nil {
			t.Fatal(err)
		}
		v := testNetdev()
		c, _ := valuesCollector(NetdevConfig{Filter: Filter{Families: fams}, PerQueueStats: true}, v)
		mfs := gather(t, c)
		asked, has := v.calls[netdev.CmdPagePoolStatsGet].Load(), mfs["xdp_netdev_page_pool_allocations_total"] != nil
		if exclude == "" && (asked == 0 || !has) {
			t.Errorf("without exclusions: page-pool-stats-get asked %d times, alloc_fast reported: %v", asked, has)
		}
		if exclude != "" && (asked != 0 || has) {
			t.Errorf("default exclusions: page-pool-stats-get asked %d times, alloc_fast reported: %v", asked, has)
		}
		if mfs["xdp_netdev_page_pool_inflight_pages"] == nil {
			t.Errorf("exclude %q lost page_pool_inflight_pages", exclude)
		}
	}
}

// labelsWithout renders m's labels but one, as a map key.
func labelsWithout(m *dto.Metric, skip string) string {
	var parts []string
	for _, l := range m.GetLabel() {
		if l.GetName() != skip {
			parts = append(parts, l.GetName()+"="+l.GetValue())
		}
	}
	return strings.Join(parts, ",")
}

// TestDeviceFilterNoDevice: a series of no device is kept unless
// device-include names the devices wanted; device-exclude never drops it.
func TestDeviceFilterNoDevice(t *testing.T) {
	re := regexp.MustCompile
	for _, c := range []struct {
		f    deviceFilter
		want bool
	}{
		{deviceFilter{}, true},
		{newDeviceFilter(nil, re(".*")), true},
		{newDeviceFilter(re("eth.*"), nil), false},
	} {
		if got := c.f.selects(""); got != c.want {
			t.Errorf("%+v selects no device: %v, want %v", c.f, got, c.want)
		}
	}
	if newDeviceFilter(nil, re(".*")).selects("eth0") {
		t.Error("device-exclude .* kept eth0")
	}
}
