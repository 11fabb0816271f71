// Package vethns builds the kernel objects tests and the lab need: a network
// namespace that plays the traffic generator's box and a veth pair whose one
// end (the device under test) stays in the caller's namespace, where the
// exporter runs, and whose other end lives in the namespace.
//
// It mirrors a physical bench: TRex in its own box, cabled to the DUT's NIC.
package vethns

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"os"
	"runtime"

	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
)

// Pair is a veth pair with one end in a named namespace.
type Pair struct {
	Namespace string // name under /run/netns
	NS        netns.NsHandle
	Host      *net.Interface // the DUT end, in the caller's namespace
	Peer      *net.Interface // the generator end, inside Namespace
	Queues    int            // RX and TX queues of each end
}

// PairConfig names the objects to make.
type PairConfig struct {
	Namespace string
	Host      string
	Peer      string
	Queues    int // RX and TX queues on both ends; 1 when zero
	// KeepIPv6 leaves IPv6 on. By default it is off on both ends so that
	// router solicitations and DAD frames do not add packets to exact counts.
	KeepIPv6 bool
}

// NewPair creates the namespace and the pair and brings both ends up. On
// error it removes whatever it had made.
func NewPair(cfg PairConfig) (p *Pair, err error) {
	if cfg.Queues <= 0 {
		cfg.Queues = 1
	}
	if len(cfg.Host) > 15 || len(cfg.Peer) > 15 {
		return nil, fmt.Errorf("interface names %q/%q longer than 15 bytes", cfg.Host, cfg.Peer)
	}
	if _, err := net.InterfaceByName(cfg.Host); err == nil {
		return nil, fmt.Errorf("interface %s already exists", cfg.Host)
	}
	ns, err := NewNamespace(cfg.Namespace, !cfg.KeepIPv6)
	if err != nil {
		return nil, err
	}
	p = &Pair{Namespace: cfg.Namespace, NS: ns, Queues: cfg.Queues}
	defer func() {
		if err != nil {
			err = errors.Join(err, p.Close())
			p = nil
		}
	}()

	q := uint32(cfg.Queues)
	veth := &netlink.Veth{
		LinkAttrs:       netlink.LinkAttrs{Name: cfg.Host, NumTxQueues: int(q), NumRxQueues: int(q)},
		PeerName:        cfg.Peer,
		PeerNamespace:   netlink.NsFd(int(ns)),
		PeerNumTxQueues: q,
		PeerNumRxQueues: q,
	}
	if err := netlink.LinkAdd(veth); err != nil {
		return p, fmt.Errorf("creating veth %s/%s with %d queues: %w", cfg.Host, cfg.Peer, q, err)
	}
	host, err := netlink.LinkByName(cfg.Host)
	if err != nil {
		return p, err
	}
	if !cfg.KeepIPv6 {
		if err := DisableIPv6(cfg.Host); err != nil {
			return p, err
		}
	}
	if err := netlink.LinkSetUp(host); err != nil {
		return p, fmt.Errorf("bringing %s up: %w", cfg.Host, err)
	}
	if p.Host, err = net.InterfaceByName(cfg.Host); err != nil {
		return p, err
	}
	err = p.Do(func() error {
		peer, err := netlink.LinkByName(cfg.Peer)
		if err != nil {
			return err
		}
		if err := netlink.LinkSetUp(peer); err != nil {
			return fmt.Errorf("bringing %s up: %w", cfg.Peer, err)
		}
		p.Peer, err = net.InterfaceByName(cfg.Peer)
		return err
	})
	return p, err
}

// Close deletes the pair and the namespace. Deleting either end of a veth
// deletes both; deleting the namespace would too, but doing it explicitly
// makes the removal synchronous.
func (p *Pair) Close() error {
	var errs []error
	if p.Host != nil {
		if l, err := netlink.LinkByName(p.Host.Name); err == nil {
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("deleting %s: %w", p.Host.Name, err))
			}
		}
	}
	if p.NS.IsOpen() {
		errs = append(errs, p.NS.Close())
	}
	if err := netns.DeleteNamed(p.Namespace); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("deleting netns %s: %w", p.Namespace, err))
	}
	return errors.Join(errs...)
}

// Do runs fn on an OS thread switched into the pair's namespace. Goroutines
// started by fn do not inherit the namespace.
func (p *Pair) Do(fn func() error) error { return InNamespace(p.NS, fn) }

// InNamespace runs fn on the calling goroutine's OS thread switched into ns.
func InNamespace(ns netns.NsHandle, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := netns.Set(ns); err != nil {
		runtime.UnlockOSThread()
		return fmt.Errorf("entering netns: %w", err)
	}
	fnErr := fn()
	if err := netns.Set(orig); err != nil {
		// Leave the thread locked: the runtime kills a thread whose
		// goroutine exits while locked, so the tainted thread is not reused.
		return errors.Join(fnErr, fmt.Errorf("returning to the original netns: %w", err))
	}
	runtime.UnlockOSThread()
	return fnErr
}

// NewNamespace creates /run/netns/name without leaving the caller's thread in
// it; with noIPv6, devices created in it start with IPv6 disabled.
func NewNamespace(name string, noIPv6 bool) (netns.NsHandle, error) {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), err
	}
	defer orig.Close()
	ns, err := netns.NewNamed(name) // also switches this thread into it
	if err != nil {
		runtime.UnlockOSThread()
		return netns.None(), fmt.Errorf("creating netns %s: %w", name, err)
	}
	var setupErr error
	if noIPv6 {
		// Inside the new namespace, so devices created or moved here later
		// inherit it.
		setupErr = os.WriteFile("/proc/sys/net/ipv6/conf/default/disable_ipv6", []byte("1"), 0)
	}
	if err := netns.Set(orig); err != nil {
		return ns, fmt.Errorf("returning from netns %s: %w", name, err)
	}
	runtime.UnlockOSThread()
	if setupErr != nil {
		ns.Close()
		_ = netns.DeleteNamed(name)
		return netns.None(), fmt.Errorf("disabling IPv6 in netns %s: %w", name, setupErr)
	}
	return ns, nil
}

// DisableIPv6 turns IPv6 off on dev, so that router solicitations and DAD
// frames do not add packets to exact counts.
func DisableIPv6(dev string) error {
	path := "/proc/sys/net/ipv6/conf/" + dev + "/disable_ipv6"
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return nil // kernel without IPv6
	}
	if err := os.WriteFile(path, []byte("1"), 0); err != nil {
		return fmt.Errorf("disabling IPv6 on %s: %w", dev, err)
	}
	return nil
}

// AttachVerdictTo attaches to ifindex of the calling thread's namespace,
// through a bpf_link, a program called name that returns verdict (an
// enum xdp_action, xdptest.Drop...) for every frame; closing the link
// detaches it.
func AttachVerdictTo(ifindex int, name string, verdict uint32) (link.Link, error) {
	prog, err := xdptest.Verdict(name, verdict)
	if err != nil {
		return nil, err
	}
	defer prog.Close() // the link keeps its own reference
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifindex})
	if err != nil {
		return nil, fmt.Errorf("attaching XDP to ifindex %d: %w", ifindex, err)
	}
	return l, nil
}

// UniqueID returns 8 hex characters, short enough for interface names.
func UniqueID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
