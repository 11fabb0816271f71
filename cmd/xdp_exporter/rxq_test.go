package main

import (
	"strings"
	"testing"
	"time"

	"github.com/vishvananda/netlink"

	"github.com/xdp-exporter/xdp_exporter/internal/netlab"
	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// deviceXDP returns the id of the XDP program on dev, 0 for none.
func deviceXDP(t *testing.T, dev string) uint32 {
	t.Helper()
	l, err := netlink.LinkByName(dev)
	if err != nil {
		t.Fatal(err)
	}
	if x := l.Attrs().Xdp; x != nil && x.Attached {
		return x.ProgId
	}
	return 0
}

// TestRxqSurvivesKill9 checks the bpf_link promise: after SIGKILL of the
// exporter no XDP program remains on the device (the kernel detaches the
// link when its last fd goes), and a new exporter attaches again, without
// --collector.rxq.force.
func TestRxqSurvivesKill9(t *testing.T) {
	testenv.Privileged(t)
	pair := netlab.TestPair(t, 2)
	args := []string{"--collector.rxq", "--collector.rxq.device=" + pair.Host.Name}

	for round := 1; round <= 2; round++ {
		e := startExporter(t, args...)
		body := e.Scrape(t)
		promtoolCheck(t, body)
		if !strings.Contains(body, `xdp_scrape_collector_success{collector="rxq"} 1`) {
			t.Fatalf("round %d: rxq collector did not succeed; log:\n%s", round, e.Stderr)
		}
		id := deviceXDP(t, pair.Host.Name)
		if id == 0 || !strings.Contains(body, `prog_id="`) {
			t.Fatalf("round %d: no XDP program on %s while the exporter runs", round, pair.Host.Name)
		}

		e.Kill(t)
		// The kernel releases the process's files as it exits, but the
		// final fput of a link may be deferred to a work queue.
		deadline := time.Now().Add(5 * time.Second)
		for deviceXDP(t, pair.Host.Name) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: XDP program %d still on %s 5s after SIGKILL", round, deviceXDP(t, pair.Host.Name), pair.Host.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestRxqWithoutDevice enables the collector without a device: the
// exporter keeps serving, reports the collector as failed and says why.
func TestRxqWithoutDevice(t *testing.T) {
	e := startExporter(t, "--collector.rxq")
	body := e.Scrape(t)
	if !strings.Contains(body, `xdp_scrape_collector_success{collector="rxq"} 0`) {
		t.Errorf("rxq not reported as failed:\n%s", body)
	}
	if want := "name each device to attach to with --collector.rxq.device"; !strings.Contains(e.Stderr.String(), want) {
		t.Errorf("log does not say %q:\n%s", want, e.Stderr)
	}
}
