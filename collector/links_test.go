package collector

import (
	"log/slog"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// TestDeviceNameNotUTF8 runs every collector that names devices on two
// veth pairs built and driven alike, one named in ASCII and one whose name
// ends in bytes that are not UTF-8 (Linux allows them). The odd one must
// appear in exactly the families the ASCII one does, with one label value
// everywhere (the bytes written as \xNN), and the scrape must gather
// without error.
func TestDeviceNameNotUTF8(t *testing.T) {
	testenv.Privileged(t)
	id := vethns.UniqueID()
	plain, odd := "xt"+id+"a", "xt"+id+"\xff\xfe"
	var pairs []*vethns.Pair
	for _, name := range []string{plain, odd} {
		p, err := vethns.NewPair(vethns.PairConfig{Namespace: "xdpt-" + vethns.UniqueID(), Host: name, Peer: "xt" + vethns.UniqueID() + "g", Queues: 2})
		testenv.Check(t, err, "creating a veth pair")
		t.Cleanup(func() { p.Close() })
		vethtest.AttachVerdict(t, p, 0) // XDP_ABORTED: an xdp:xdp_exception per frame
		pairs = append(pairs, p)
	}

	logger := slog.New(slog.DiscardHandler)
	collectors := deviceNamingCollectors(t, logger)
	set := NewSet(collectors, logger)
	t.Cleanup(func() { set.Close() })

	for _, p := range pairs {
		vethtest.SendExactly(t, p, 500)
	}

	mfs := hostGather(t, set, NewLinkSnapshot())

	label := `xt` + id + `\xff\xfe`
	plainFams, oddFams := familiesOf(mfs, plain), familiesOf(mfs, label)
	if !slices.Equal(plainFams, oddFams) {
		t.Errorf("families of %s:\n%v\nfamilies of %q:\n%v", plain, plainFams, odd, oddFams)
	}
	want := []string{"xdp_nic_driver_info", "xdp_bpf_prog_info", "xdp_monitor_exceptions_total", "xdp_napi_poll_work"}
	if _, ok := collectors["netdev"]; ok {
		want = append(want, "xdp_netdev_xdp_feature")
	}
	if !testenv.KernelBefore(t, 6, 1) { // 5.10's veth reports no channels
		want = append(want, "xdp_nic_channels")
	}
	for _, want := range want {
		if !slices.Contains(oddFams, want) {
			t.Errorf("%s has no series for %q", want, odd)
		}
	}
	// No other spelling of the odd name anywhere.
	other := regexp.MustCompile(`^xt` + id + `[^a]`)
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if v := l.GetValue(); other.MatchString(v) && v != label {
					t.Errorf("%s{%s=%q}: the device is %q elsewhere", mf.GetName(), l.GetName(), v, label)
				}
			}
		}
	}
	t.Logf("%d families carry %q", len(oddFams), label)
}

// deviceNamingCollectors builds every collector that names devices (the
// netdev collector where the kernel has its family: Linux 6.3).
func deviceNamingCollectors(t *testing.T, logger *slog.Logger) map[string]Collector {
	t.Helper()
	eth, err := NewEthtoolCollector(EthtoolConfig{}, logger)
	testenv.Check(t, err, "ethtool collector")
	bp, err := newBPFCollector(BPFConfig{}, logger)
	testenv.Check(t, err, "bpf collector")
	xd, err := NewXDPCollector(XDPConfig{}, logger)
	testenv.Check(t, err, "monitor collector")
	np, err := loadNapiCollector(NapiConfig{}, logger)
	testenv.Check(t, err, "napi collector")
	collectors := map[string]Collector{"nic": eth, "bpf": bp, "monitor": xd, "napi": np}
	// Before Linux 6.3 there is no netdev family, and nothing of it to label.
	nd, err := dialNetdevCollector(NetdevConfig{PerQueueStats: true}, logger)
	if !unsupportedOnly(err) || !testenv.KernelBefore(t, 6, 3) {
		testenv.Check(t, err, "netdev collector")
		collectors["netdev"] = nd
	}
	return collectors
}

// familiesOf lists the families with a sample whose device label is dev.
func familiesOf(mfs []*dto.MetricFamily, dev string) []string {
	var out []string
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool {
				return strings.HasSuffix(l.GetName(), "device") && l.GetValue() == dev
			}) {
				out = append(out, mf.GetName())
				break
			}
		}
	}
	sort.Strings(out)
	return out
}
