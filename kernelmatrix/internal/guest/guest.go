// Package guest is what the guest programs of the host tests that boot a
// guest of their own (pcieguest, nicguest) share: their command line, the
// exporter run as a user runs it (the real binary on a loopback port,
// scraped over HTTP), and frames sent from one NIC of the guest to another.
package guest

import (
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"time"

	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/lab/trafficgen"
)

// Main runs a guest program, `name EXPORTER OUTDIR [args...]`, and exits
// 1 with the error on stderr when it fails.
func Main(name string, run func(exporter, out string, args []string) error) {
	log.SetFlags(0)
	log.SetPrefix(name + ": ")
	if len(os.Args) < 3 {
		log.Fatalf("usage: %s EXPORTER OUTDIR [flags]", name)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3:]); err != nil {
		log.Fatal(err)
	}
}

// Exporter is a running exporter.
type Exporter struct {
	addr string
	cmd  *exec.Cmd
}

// StartExporter starts binary with args on addr and waits until it
// answers.
func StartExporter(binary, addr string, args ...string) (*Exporter, error) {
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

// Send sends n frames from the NIC from to the MAC of the NIC to through
// AF_PACKET from CPU 0, at rate frames per second (0: as fast as it goes),
// and fails unless all went out.
func Send(from, to string, n uint64, rate float64) error {
	src, err := net.InterfaceByName(from)
	if err != nil {
		return err
	}
	dst, err := net.InterfaceByName(to)
	if err != nil {
		return err
	}
	g, err := trafficgen.New()
	if err != nil {
		return err
	}
	defer g.Close()
	sent, err := g.Run(context.Background(), trafficgen.Config{NS: netns.None(), Ifindex: src.Index, SrcMAC: src.HardwareAddr,
		DstMAC: dst.HardwareAddr, Count: n, Rate: rate, CPUs: []int{0}})
	if err == nil && sent != n {
		err = fmt.Errorf("%s: sent %d of %d frames", from, sent, n)
	}
	return err
}
