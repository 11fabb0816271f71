// Package guestexporter runs the exporter inside a kernel matrix guest as
// a user would, for the guest programs (pcieguest, nicguest): the real
// binary on a loopback port, scraped over HTTP.
package guestexporter

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"time"

	"golang.org/x/sys/unix"
)

// Exporter is a running exporter.
type Exporter struct {
	addr string
	cmd  *exec.Cmd
}

// Start starts binary with args on addr and waits until it answers.
func Start(binary, addr string, args ...string) (*Exporter, error) {
	cmd := exec.Command(binary, append([]string{"--web.listen-address=" + addr}, args...)...)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	e := &Exporter{addr: addr, cmd: cmd}
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return e, nil
		}
		if time.Now().After(deadline) {
			e.Stop()
			return nil, fmt.Errorf("the exporter did not answer: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Scrape is one /metrics.
func (e *Exporter) Scrape() ([]byte, error) {
	resp, err := http.Get("http://" + e.addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// Stop ends the exporter as a service manager does (SIGTERM).
func (e *Exporter) Stop() {
	_ = e.cmd.Process.Signal(unix.SIGTERM)
	_ = e.cmd.Wait()
}
