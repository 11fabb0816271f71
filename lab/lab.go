// Package lab is the XDP benchmark bench on veth: the methodology of the XDP
// paper's benchmark notes on one Linux box. A namespace plays the traffic
// generator's machine; veth pairs are the cables to the device under test
// (DUT), whose ends stay in the caller's namespace where the exporter runs.
//
//	netns xdp-lab                       host namespace
//	xlab0g 198.18.0.1/30  <-- veth -->  xlab0 198.18.0.2/30   DUT ingress
//	xlab1g 198.18.1.1/30  <-- veth -->  xlab1 198.18.1.2/30   redirect egress ("different NIC")
package lab

import (
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"os"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// Lab names one lab's objects. Everything a lab makes is named here, so
// Down removes exactly these and nothing else: the tests make labs of
// their own (ForTest) and never touch the one `xdp-lab up` made (Default).
type Lab struct {
	Namespace string
	DUT       string // where traffic arrives and the rxq program runs
	Gen       string // the generator's end, in Namespace
	Egress    string // redirect target on the DUT
	Sink      string // receives redirected frames, in Namespace
	// Net picks the lab's addresses: 198.18.2Net.0/30 between DUT and
	// Gen, 198.18.2Net+1.0/30 between Egress and Sink (RFC 2544's
	// benchmarking block), so that labs side by side do not share a
	// route.
	Net uint8
}

// Default is the lab of `xdp-lab up`, which the tutorial's commands use (docs/tutorial.md).
func Default() Lab {
	return Lab{Namespace: "xdp-lab", DUT: "xlab0", Gen: "xlab0g", Egress: "xlab1", Sink: "xlab1g"}
}

// ForTest is a lab whose names and addresses derive from id (8 hex
// characters, vethns.UniqueID), beside any other lab.
func ForTest(id string) Lab {
	return Lab{
		Namespace: "xdplt-" + id, DUT: "xl" + id + "0", Gen: "xl" + id + "0g", Egress: "xl" + id + "1", Sink: "xl" + id + "1g",
		Net: uint8(1 + crc32.ChecksumIEEE([]byte(id))%127),
	}
}

// MaxQueues is veth's limit on RX/TX queues per device.
const MaxQueues = 4096

// Link is one veth pair of the lab.
type Link struct {
	Host, Peer         string
	HostAddr, PeerAddr *net.IPNet
}

// Links lists the lab's pairs.
func (lb Lab) Links() []Link {
	a, b := 2*int(lb.Net), 2*int(lb.Net)+1
	return []Link{
		{Host: lb.DUT, Peer: lb.Gen, HostAddr: mustCIDR(fmt.Sprintf("198.18.%d.2/30", a)), PeerAddr: mustCIDR(fmt.Sprintf("198.18.%d.1/30", a))},
		{Host: lb.Egress, Peer: lb.Sink, HostAddr: mustCIDR(fmt.Sprintf("198.18.%d.2/30", b)), PeerAddr: mustCIDR(fmt.Sprintf("198.18.%d.1/30", b))},
	}
}

func mustCIDR(s string) *net.IPNet {
	ip, n, err := net.ParseCIDR(s)
	if err != nil {
		panic(err)
	}
	n.IP = ip
	return n
}

// Up creates the namespace and pairs with queues RX/TX queues each, sets
// addresses and static neighbours, and brings everything up. It is
// idempotent: on a half-made lab it completes what is missing, and it fails
// if an existing lab has a different queue count. On an error it removes
// what this call created.
func (lb Lab) Up(queues int) (err error) {
	if queues < 1 || queues > MaxQueues {
		return fmt.Errorf("--queues %d: veth supports 1 to %d queues", queues, MaxQueues)
	}
	if os.Geteuid() != 0 {
		return errors.New("the lab needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to make namespaces and veth pairs)")
	}
	var created []func() error
	defer func() {
		if err != nil {
			for i := len(created) - 1; i >= 0; i-- {
				err = errors.Join(err, created[i]())
			}
		}
	}()

	ns, err := netns.GetFromName(lb.Namespace)
	if err != nil {
		// IPv6 off: router solicitations and DAD frames would disturb
		// exact packet counts.
		if ns, err = vethns.NewNamespace(lb.Namespace, true); err != nil {
			return err
		}
		created = append(created, func() error { return netns.DeleteNamed(lb.Namespace) })
	}
	defer ns.Close()
	nsh, err := netlink.NewHandleAt(ns)
	if err != nil {
		return fmt.Errorf("netlink handle in netns %s: %w", lb.Namespace, err)
	}
	defer nsh.Close()

	for _, l := range lb.Links() {
		if err := lb.upPair(l, queues, ns, nsh, &created); err != nil {
			return err
		}
	}
	return nil
}

// upPair makes (or finds, with the same queue count) one veth pair and
// configures both ends; what it creates is added to created.
func (lb Lab) upPair(l Link, queues int, ns netns.NsHandle, nsh *netlink.Handle, created *[]func() error) error {
	host, err := netlink.LinkByName(l.Host)
	if err == nil {
		if _, ok := host.(*netlink.Veth); !ok {
			return fmt.Errorf("device %s exists and is not the lab's veth; remove it or rename it", l.Host)
		}
		if n := host.Attrs().NumRxQueues; n != queues {
			return fmt.Errorf("lab is up with %d queues, not %d: run `xdp-lab down` first", n, queues)
		}
	} else {
		if _, err := nsh.LinkByName(l.Peer); err == nil {
			// A pair whose host end is gone cannot exist (deleting one end
			// deletes both), but a stray device of that name might.
			return fmt.Errorf("device %s already exists in netns %s", l.Peer, lb.Namespace)
		}
		veth := &netlink.Veth{
			LinkAttrs:       netlink.LinkAttrs{Name: l.Host, NumTxQueues: queues, NumRxQueues: queues},
			PeerName:        l.Peer,
			PeerNamespace:   netlink.NsFd(int(ns)),
			PeerNumTxQueues: uint32(queues),
			PeerNumRxQueues: uint32(queues),
		}
		if err := netlink.LinkAdd(veth); err != nil {
			return fmt.Errorf("creating veth %s <-> %s with %d queues: %w", l.Host, l.Peer, queues, err)
		}
		name := l.Host
		*created = append(*created, func() error { return deleteLink(netlinkHandle(), name) })
		if host, err = netlink.LinkByName(l.Host); err != nil {
			return err
		}
	}
	if err := configure(netlinkHandle(), host, l.HostAddr, "/proc/sys/net/ipv6/conf/"+l.Host+"/disable_ipv6"); err != nil {
		return err
	}
	peer, err := nsh.LinkByName(l.Peer)
	if err != nil {
		return fmt.Errorf("%s in netns %s: %w", l.Peer, lb.Namespace, err)
	}
	if err := configure(nsh, peer, l.PeerAddr, ""); err != nil {
		return err
	}
	if err := neighbour(netlinkHandle(), host, l.PeerAddr.IP, peer.Attrs().HardwareAddr); err != nil {
		return err
	}
	return neighbour(nsh, peer, l.HostAddr.IP, host.Attrs().HardwareAddr)
}

func configure(h *netlink.Handle, l netlink.Link, addr *net.IPNet, ipv6Sysctl string) error {
	if ipv6Sysctl != "" {
		if err := os.WriteFile(ipv6Sysctl, []byte("1"), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("disabling IPv6 on %s: %w", l.Attrs().Name, err)
		}
	}
	if err := h.AddrReplace(l, &netlink.Addr{IPNet: addr}); err != nil {
		return fmt.Errorf("address %s on %s: %w", addr, l.Attrs().Name, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return fmt.Errorf("bringing %s up: %w", l.Attrs().Name, err)
	}
	return nil
}

func neighbour(h *netlink.Handle, l netlink.Link, ip net.IP, mac net.HardwareAddr) error {
	err := h.NeighSet(&netlink.Neigh{
		LinkIndex: l.Attrs().Index, Family: netlink.FAMILY_V4,
		State: netlink.NUD_PERMANENT, IP: ip, HardwareAddr: mac,
	})
	if err != nil {
		return fmt.Errorf("neighbour %s on %s: %w", ip, l.Attrs().Name, err)
	}
	return nil
}

// Down removes the lab's pairs, namespace and iptables rule, and only
// those. It succeeds on a lab that is partly or wholly gone.
func (lb Lab) Down() error {
	errs := []error{lb.removeRawDrop()}
	for _, l := range lb.Links() {
		errs = append(errs, deleteLink(netlinkHandle(), l.Host))
	}
	if err := netns.DeleteNamed(lb.Namespace); err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, fmt.Errorf("deleting netns %s: %w", lb.Namespace, err))
	}
	return errors.Join(errs...)
}

func deleteLink(h *netlink.Handle, name string) error {
	l, err := h.LinkByName(name)
	if err != nil {
		var notFound netlink.LinkNotFoundError
		if errors.As(err, &notFound) || strings.Contains(err.Error(), "not found") {
			return nil
		}
		return err
	}
	if _, ok := l.(*netlink.Veth); !ok {
		return fmt.Errorf("%s is not a veth; left in place", name)
	}
	if err := h.LinkDel(l); err != nil {
		return fmt.Errorf("deleting %s: %w", name, err)
	}
	return nil
}

// netlinkHandle is a handle in the caller's namespace (the zero Handle uses
// the package-level socket of vishvananda/netlink).
func netlinkHandle() *netlink.Handle { return &netlink.Handle{} }

// Queues returns the DUT's RX queue count, or an error when the lab is down.
func (lb Lab) Queues() (int, error) {
	l, err := netlink.LinkByName(lb.DUT)
	if err != nil {
		return 0, fmt.Errorf("lab is not up (run `xdp-lab up`): %w", err)
	}
	return l.Attrs().NumRxQueues, nil
}
