package collector

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/internal/netlab"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/trafficgen"
)

// TestEthtoolVethXDPExact sends a known number of frames from each CPU to
// a veth with two RX queues and an XDP_DROP program, and checks the
// collector's per-queue veth XDP counters equal what was sent, exactly.
func TestEthtoolVethXDPExact(t *testing.T) {
	pair := netlab.TestPair(t, 2)
	pair.AttachVerdict(t, netlab.XDPDrop)

	g, err := trafficgen.New()
	testenv.Check(t, err, "loading the generator")
	defer g.Close()

	c, err := NewEthtoolCollector(EthtoolConfig{DeviceInclude: regexp.MustCompile(regexp.QuoteMeta(pair.Host.Name))}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	// On veth the RX queue is the sending CPU modulo the queue count, so
	// sending from one CPU at a time fixes each queue's expected count.
	sent := map[string]uint64{"0": 0, "1": 0}
	for _, step := range []struct {
		cpu   int
		count uint64
	}{{0, 30_000}, {1, 20_000}, {0, 1_234}} {
		n, err := g.Run(context.Background(), trafficgen.Config{
			NS: pair.NS, Ifindex: pair.Peer.Index,
			SrcMAC: pair.Peer.HardwareAddr, DstMAC: pair.Host.HardwareAddr,
			Count: step.count, CPUs: []int{step.cpu},
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != step.count {
			t.Fatalf("generator sent %d frames, want %d", n, step.count)
		}
		sent[fmt.Sprint(step.cpu)] += step.count

		mfs := gatherOnce(t, c)
		dev := pair.Host.Name
		for q, want := range sent {
			if got := value(t, mfs, "xdp_ethtool_rx_xdp_packets_total", "device", dev, "queue", q, "action", "drop"); got != float64(want) {
				t.Errorf("queue %s: XDP drops = %v, want %d", q, got, want)
			}
			if got := value(t, mfs, "xdp_ethtool_rx_xdp_processed_packets_total", "device", dev, "queue", q); got != float64(want) {
				t.Errorf("queue %s: XDP packets = %v, want %d", q, got, want)
			}
			if got := value(t, mfs, "xdp_ethtool_rx_xdp_processed_bytes_total", "device", dev, "queue", q); got != float64(want*60) {
				t.Errorf("queue %s: XDP bytes = %v, want %d", q, got, want*60)
			}
			if got := value(t, mfs, "xdp_ethtool_rx_xdp_packets_total", "device", dev, "queue", q, "action", "tx"); got != 0 {
				t.Errorf("queue %s: XDP_TX = %v, want 0", q, got)
			}
		}
		value(t, mfs, "xdp_ethtool_driver_info", "device", dev, "driver", "veth")
		if got := value(t, mfs, "xdp_ethtool_channels", "device", dev, "type", "rx"); got != 2 {
			t.Errorf("rx channels = %v, want 2", got)
		}
	}
}

// TestEthtoolGuardPage asks the kernel for fewer stats and strings than a
// veth has: the kernel writes them all anyway, so without the guard page
// this would overwrite memory; with it the call reports the change.
func TestEthtoolGuardPage(t *testing.T) {
	pair := netlab.TestPair(t, 1)
	k, err := newKernelEthtool()
	if err != nil {
		t.Fatal(err)
	}
	defer k.Close()
	info, err := k.DriverInfo(pair.Host.Name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := k.StatNames(pair.Host.Name, info.NStats-1); !errors.Is(err, errStatsChanged) {
		t.Errorf("GSTRINGS with a short buffer: %v, want errStatsChanged", err)
	}
	if _, err := k.Stats(pair.Host.Name, info.NStats-1, nil); !errors.Is(err, errStatsChanged) {
		t.Errorf("GSTATS with a short buffer: %v, want errStatsChanged", err)
	}
	names, err := k.StatNames(pair.Host.Name, info.NStats)
	if err != nil || len(names) != info.NStats || names[0] != "peer_ifindex" {
		t.Fatalf("StatNames = %q, %v", names, err)
	}
	vals, err := k.Stats(pair.Host.Name, info.NStats, nil)
	if err != nil || vals[0] == 0 {
		t.Fatalf("Stats = %v, %v; want peer_ifindex first", vals, err)
	}
}

// recording runs Update and keeps its error instead of panicking.
type recording struct {
	c   Collector
	err error
}

func (r *recording) Describe(chan<- *prometheus.Desc) {}
func (r *recording) Collect(ch chan<- prometheus.Metric) {
	r.err = r.c.Update(context.Background(), ch)
}

// TestEthtoolVethChurn scrapes 500 times back to back while veth pairs
// are created and deleted: no scrape may fail, panic or yield a
// duplicate series (the pedantic registry rejects duplicates).
func TestEthtoolVethChurn(t *testing.T) {
	testenv.Privileged(t)
	prefix := "xc" + netlab.UniqueID()
	c, err := NewEthtoolCollector(EthtoolConfig{
		DeviceInclude:  regexp.MustCompile(prefix + ".*"),
		MetricsInclude: regexp.MustCompile(".*"),
	}, discardLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	var made atomic.Int64
	var churnErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			a, b := fmt.Sprintf("%sa%d", prefix, i%4), fmt.Sprintf("%sb%d", prefix, i%4)
			if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: a}, PeerName: b}); err != nil {
				churnErr = err
				return
			}
			made.Add(1)
			if l, err := netlink.LinkByName(a); err == nil {
				_ = netlink.LinkDel(l)
			}
		}
	}()
	defer func() {
		close(stop)
		wg.Wait()
		for i := range 4 {
			if l, err := netlink.LinkByName(fmt.Sprintf("%sa%d", prefix, i)); err == nil {
				_ = netlink.LinkDel(l)
			}
		}
	}()

	// At least 500 back-to-back scrapes, and more until the churn has made
	// and deleted 20 pairs (creating a veth takes far longer than a scrape).
	seen, scrapes := 0, 0
	for i := 0; i < 500 || (made.Load() < 20 && churnErr == nil && i < 1_000_000); i++ {
		scrapes++
		r := &recording{c: c}
		reg := prometheus.NewPedanticRegistry()
		reg.MustRegister(r)
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatalf("scrape %d: %v", i, err)
		}
		if r.err != nil {
			t.Fatalf("scrape %d failed: %v", i, r.err)
		}
		for _, mf := range mfs {
			if mf.GetName() == "xdp_ethtool_driver_info" && len(mf.GetMetric()) > 0 {
				seen++
			}
		}
		checkNoDuplicates(t, mfs)
	}
	if churnErr != nil {
		t.Fatalf("churn: %v", churnErr)
	}
	if seen == 0 || made.Load() < 20 {
		t.Fatalf("churn did not overlap the scrapes: devices seen in %d scrapes, %d pairs made", seen, made.Load())
	}
	t.Logf("%d scrapes, churn devices present in %d, %d pairs created and deleted", scrapes, seen, made.Load())
}

func checkNoDuplicates(t *testing.T, mfs []*dto.MetricFamily) {
	t.Helper()
	for _, mf := range mfs {
		seen := map[string]bool{}
		for _, m := range mf.GetMetric() {
			k := fmt.Sprint(m.GetLabel())
			if seen[k] {
				t.Fatalf("duplicate series %s%s", mf.GetName(), k)
			}
			seen[k] = true
		}
	}
}
