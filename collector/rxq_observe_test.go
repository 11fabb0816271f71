package collector

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/alecthomas/kingpin/v2"
	"github.com/cilium/ebpf/link"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// TestRxqObserveAttachFlags: the flags of attach mode are an error with
// --collector.rxq.observe, not ignored.
func TestRxqObserveAttachFlags(t *testing.T) {
	app := kingpin.New("test", "")
	sel := AddFlags(app)
	if _, err := app.Parse([]string{"--collector.rxq", "--collector.rxq.observe", "--collector.rxq.action=drop", "--collector.rxq.force"}); err != nil {
		t.Fatal(err)
	}
	c := sel.Build(slog.New(slog.DiscardHandler))["rxq"]
	err := c.Update(context.Background(), NewLinkSnapshot(), make(chan<- prometheus.Metric, 1))
	want := "--collector.rxq.action, --collector.rxq.force only apply when the exporter attaches its own program"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Update: %v, want an error saying %q", err, want)
	}
}

// TestRxqObserveFollows follows a device's programs from one scrape to the
// next: none, one without BTF (reported unobservable, not a failure), none
// again, then one that can be traced, whose counts stay after it is
// detached while its observer goes with it.
func TestRxqObserveFollows(t *testing.T) {
	pair := vethtest.Pair(t, 2)
	dev := pair.Host.Name
	c, err := NewRxqCollector(RxqConfig{Observe: true, Devices: []string{dev}}, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "starting the rxq collector in observe mode")
	defer c.Close()
	if mfs := gather(t, c); len(mfs) != 0 {
		t.Errorf("series for a device without XDP: %v", mfs)
	}

	raw, err := vethns.AttachVerdictTo(pair.Host.Index, "xdpt_verdict", xdptest.Pass)
	testenv.Check(t, err, "attaching a program without BTF")
	id := vethtest.AttachedXDP(t, dev)
	mfs := gather(t, c)
	if v := mfs.Value(t, "xdp_rxq_unobservable_info", "device", dev, "attach_mode", "native", "prog_id", fmt.Sprint(id), "reason", "no_btf"); v != 1 {
		t.Errorf("xdp_rxq_unobservable_info{reason=no_btf} = %v, want 1", v)
	}
	raw.Close()
	if mfs := gather(t, c); mfs["xdp_rxq_unobservable_info"] != nil {
		t.Errorf("a detached program is still reported: %v", mfs["xdp_rxq_unobservable_info"])
	}

	var objs xdptest.TailcallObjects
	if err := xdptest.LoadTailcallObjects(&objs, nil); err != nil {
		t.Fatal(err)
	}
	defer objs.Close()
	l, err := link.AttachXDP(link.XDPOptions{Program: objs.XdpEntry, Interface: pair.Host.Index})
	if err != nil {
		t.Fatal(err)
	}
	id = vethtest.AttachedXDP(t, dev)
	mfs = gather(t, c)
	if mfs["xdp_rxq_observed_info"] == nil {
		reason := mfs["xdp_rxq_unobservable_info"].GetMetric()
		if len(reason) != 1 {
			t.Fatalf("program %d is neither observed nor unobservable", id)
		}
		t.Logf("this kernel cannot observe XDP programs: %v", reason[0].GetLabel())
		l.Close()
		return
	}
	t.Run("counted", func(t *testing.T) {
		const n = 1000
		vethtest.SendExactly(t, pair, n)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		mfs := gather(t, c)
		if mfs["xdp_rxq_observed_info"] != nil {
			t.Errorf("a detached program is still observed: %v", mfs["xdp_rxq_observed_info"])
		}
		if got, _ := mfs.Sum("xdp_rxq_packets_total", "device", dev, "action", "pass"); got != n {
			t.Errorf("after the program was detached its counts read %v, want %d", got, n)
		}
		if links := vethtest.ObserverLinks(t); len(links) > 0 {
			t.Errorf("observer links %+v outlive the detached program %d", links, id)
		}
	})
}
