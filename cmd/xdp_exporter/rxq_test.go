package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// deviceXDP returns the id of the XDP program on dev, 0 for none.
// TestRxqSurvivesKill9 checks the bpf_link promise: after SIGKILL of the
// exporter no XDP program remains on the device (the kernel detaches the
// link when its last fd goes), and a new exporter attaches again, without
// --collector.rxq.force.
func TestRxqSurvivesKill9(t *testing.T) {
	testenv.Privileged(t)
	pair := vethtest.Pair(t, 2)
	args := []string{"--collector.rxq", "--collector.rxq.device=" + pair.Host.Name}

	for round := 1; round <= 2; round++ {
		e := startExporter(t, args...)
		body := e.Scrape(t)
		promtest.CheckMetrics(t, body)
		if !strings.Contains(body, `xdp_scrape_collector_success{collector="rxq"} 1`) {
			t.Fatalf("round %d: rxq collector did not succeed; log:\n%s", round, e.Stderr)
		}
		id := vethtest.AttachedXDP(t, pair.Host.Name)
		if id == 0 || !strings.Contains(body, `prog_id="`) {
			t.Fatalf("round %d: no XDP program on %s while the exporter runs", round, pair.Host.Name)
		}

		e.Kill(t)
		// The kernel releases the process's files as it exits, but the
		// final fput of a link may be deferred to a work queue.
		deadline := time.Now().Add(5 * time.Second)
		for vethtest.AttachedXDP(t, pair.Host.Name) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("round %d: XDP program %d still on %s 5s after SIGKILL", round, vethtest.AttachedXDP(t, pair.Host.Name), pair.Host.Name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// waitDetached waits for the kernel to release a killed process's link:
// the final fput of a link may be deferred to a work queue.
func waitDetached(t *testing.T, dev, when string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for vethtest.AttachedXDP(t, dev) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%s: XDP program %d still on %s 5s after SIGKILL", when, vethtest.AttachedXDP(t, dev), dev)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestRxqKill9DuringAttachAndScrape kills the exporter at moments spread
// over its start-up (while it loads and attaches) and then in the middle of
// a burst of scrapes: nothing is ever left attached or pinned, and a new
// exporter attaches without --collector.rxq.force.
func TestRxqKill9DuringAttachAndScrape(t *testing.T) {
	testenv.Privileged(t)
	pair := vethtest.Pair(t, 2)
	args := []string{"--collector.rxq", "--collector.rxq.device=" + pair.Host.Name}
	pinnedBefore := pinned(t)
	for _, delay := range []time.Duration{0, 2 * time.Millisecond, 10 * time.Millisecond, 30 * time.Millisecond, 100 * time.Millisecond} {
		cmd := exec.Command(exportertest.Build(t), append([]string{"--web.listen-address=" + exportertest.FreeAddr(t)}, args...)...)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		time.Sleep(delay)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		_ = cmd.Wait()
		waitDetached(t, pair.Host.Name, fmt.Sprintf("killed %v after start", delay))
	}

	e := startExporter(t, args...)
	stop := make(chan struct{})
	scraping := make(chan struct{})
	go func() {
		defer close(scraping)
		for {
			select {
			case <-stop:
				return
			default:
			}
			if resp, err := http.Get("http://" + e.Addr + "/metrics"); err == nil {
				_, _ = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
	}()
	time.Sleep(200 * time.Millisecond)
	e.Kill(t)
	close(stop)
	<-scraping
	waitDetached(t, pair.Host.Name, "killed during scrapes")
	if after := pinned(t); after != pinnedBefore {
		t.Errorf("pins under /sys/fs/bpf changed:\nbefore:\n%s\nafter:\n%s", pinnedBefore, after)
	}

	body := startExporter(t, args...).Scrape(t)
	if !strings.Contains(body, `xdp_scrape_collector_success{collector="rxq"} 1`) {
		t.Fatalf("restart after SIGKILL did not attach:\n%s", body)
	}
}

// pinned lists what is pinned in the BPF filesystem, which the exporter
// never uses; an unmounted /sys/fs/bpf lists as empty.
func pinned(t *testing.T) string {
	t.Helper()
	var out []string
	err := filepath.WalkDir("/sys/fs/bpf", func(path string, _ fs.DirEntry, err error) error {
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		out = append(out, path)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(out, "\n")
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
