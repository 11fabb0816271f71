// Package e2e holds the end-to-end test: the lab's traffic, the real
// exporter and a real Prometheus, with every dashboard and rule query
// evaluated against what Prometheus scraped.
package e2e

import (
	"fmt"
	"io"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
)

// abortProgram returns XDP_ABORTED for every frame, which fires
// xdp:xdp_exception.
func abortProgram() (*ebpf.Program, error) { return xdptest.Verdict("e2e_abort", xdptest.Aborted) }

// cpumapRedirect attaches to ifindex a program that redirects every frame
// to CPU cpu through a cpumap, which fires xdp:xdp_cpumap_enqueue and
// xdp:xdp_cpumap_kthread.
func cpumapRedirect(ifindex int, cpu uint32) (io.Closer, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.CPUMap, KeySize: 4, ValueSize: 4, MaxEntries: cpu + 1})
	if err != nil {
		return nil, fmt.Errorf("cpumap: %w", err)
	}
	if err := m.Put(uint32(0), uint32(192)); err != nil { // queue size
		m.Close()
		return nil, fmt.Errorf("cpumap entry: %w", err)
	}
	return attach(ifindex, m, func() (*ebpf.Program, error) { return xdptest.RedirectMap("e2e_cpumap", m) })
}

// devmapRedirect attaches to ifindex a program that redirects every frame
// to target through a devmap; with target down, every redirect fails with
// ENETDOWN (xdp:xdp_redirect_map_err / xdp_redirect_err).
func devmapRedirect(ifindex, target int) (io.Closer, error) {
	m, err := ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.DevMap, KeySize: 4, ValueSize: 4, MaxEntries: 1})
	if err != nil {
		return nil, fmt.Errorf("devmap: %w", err)
	}
	if err := m.Put(uint32(0), uint32(target)); err != nil {
		m.Close()
		return nil, fmt.Errorf("devmap entry: %w", err)
	}
	return attach(ifindex, m, func() (*ebpf.Program, error) { return xdptest.RedirectMap("e2e_devmap", m) })
}

type attached struct {
	l link.Link
	m *ebpf.Map
}

func (a attached) Close() error {
	err := a.l.Close()
	if a.m != nil {
		a.m.Close()
	}
	return err
}

func attach(ifindex int, m *ebpf.Map, load func() (*ebpf.Program, error)) (io.Closer, error) {
	prog, err := load()
	if err != nil {
		if m != nil {
			m.Close()
		}
		return nil, err
	}
	defer prog.Close()
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
	if err != nil {
		if m != nil {
			m.Close()
		}
		return nil, fmt.Errorf("attaching %s: %w", prog, err)
	}
	return attached{l: l, m: m}, nil
}

// abortOn attaches the XDP_ABORTED program to ifindex.
func abortOn(ifindex int) (io.Closer, error) { return attach(ifindex, nil, abortProgram) }

// passOn attaches to ifindex a program that passes every frame to the
// stack, where the tc ingress hook runs.
func passOn(ifindex int) (io.Closer, error) {
	return attach(ifindex, nil, func() (*ebpf.Program, error) { return xdptest.Verdict("e2e_pass", xdptest.Pass) })
}
