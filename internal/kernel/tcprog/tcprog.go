// Package tcprog lists the BPF programs on the traffic-control hooks of
// the namespace's devices, as `bpftool net` lists them: cls_bpf filters
// under a clsact or ingress qdisc ("tc"), tcx (Linux 6.6) and netkit
// (Linux 6.7). It never attaches anything.
package tcprog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	mnl "github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

// The kinds of attachment, as the bpf collector's kind label names them.
const (
	KindTC     = "tc"
	KindTCX    = "tcx"
	KindNetkit = "netkit"
)

// Attachment is one program on one hook of one device.
type Attachment struct {
	Ifindex uint32
	Kind    string
	// Direction is ingress or egress for tc and tcx. netkit's programs
	// run in the device's transmit routine: primary is the program that
	// runs for what the primary device sends, peer for what its peer
	// (usually in a container's namespace) sends; both are attached
	// through the primary.
	Direction string
	// Order is the program's place in the hook's run order, from 0: tc
	// filters by preference (as the dump returns them), tcx and netkit
	// in their multi-program array.
	Order int
	Prog  ebpf.ProgramID
	// Link is the bpf_link that holds the program, 0 when none does
	// (tc filters never have one).
	Link link.ID
}

// UnsupportedHint says why a kernel of release major.minor lacks a kind:
// too old for it, or, for netkit, built without CONFIG_NETKIT (a module
// or a choice that every kernel since 6.7 may make).
func UnsupportedHint(kind string, major, minor int) string {
	switch {
	case kind == KindTCX:
		return "needs Linux 6.6 or later"
	case kind == KindNetkit && (major < 6 || major == 6 && minor < 7):
		return "needs Linux 6.7 or later"
	case kind == KindNetkit:
		return "the kernel was built without CONFIG_NETKIT"
	}
	return ""
}

// RunningHint is UnsupportedHint for the running kernel.
func RunningHint(kind string) string {
	var u unix.Utsname
	var major, minor int
	if err := unix.Uname(&u); err == nil {
		_, _ = fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	}
	return UnsupportedHint(kind, major, minor)
}

// ErrNoTCX is a kernel without tcx (before Linux 6.6).
var ErrNoTCX = fmt.Errorf("%w: the kernel has no tcx hooks (BPF_TCX_INGRESS; %s)", errors.ErrUnsupported, UnsupportedHint(KindTCX, 0, 0))

// ProbeTCX asks for the tcx ingress programs of the loopback device: a
// kernel without tcx refuses the attach type (EINVAL).
func ProbeTCX() error {
	_, err := link.QueryPrograms(link.QueryOptions{Target: loopback, Attach: ebpf.AttachTCXIngress})
	if errors.Is(err, unix.EINVAL) {
		return ErrNoTCX
	}
	if err != nil {
		return fmt.Errorf("probing tcx (BPF_PROG_QUERY BPF_TCX_INGRESS): %w", err)
	}
	return nil
}

// ProbeNetkit asks for the netkit programs of the loopback device: a
// kernel with netkit says it is no netkit device (ENXIO), one without
// refuses the attach type (EINVAL).
func ProbeNetkit() error {
	_, err := link.QueryPrograms(link.QueryOptions{Target: loopback, Attach: ebpf.AttachNetkitPrimary})
	switch {
	case errors.Is(err, unix.ENXIO):
		return nil
	case errors.Is(err, unix.EINVAL):
		return fmt.Errorf("%w: the kernel has no netkit devices (BPF_NETKIT_PRIMARY; %s)", errors.ErrUnsupported, RunningHint(KindNetkit))
	case err != nil:
		return fmt.Errorf("probing netkit (BPF_PROG_QUERY BPF_NETKIT_PRIMARY): %w", err)
	}
	return nil
}

// loopback is the ifindex of lo in every network namespace.
const loopback = 1

// Dumper dumps qdiscs and filters over one route netlink socket, kept for
// a scrape: a socket per dump costs more than the dump of a device's
// filters.
type Dumper struct{ conn *mnl.Conn }

// NewDumper opens the socket.
func NewDumper() (*Dumper, error) {
	conn, err := mnl.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return nil, fmt.Errorf("opening a route netlink socket: %w", err)
	}
	return &Dumper{conn: conn}, nil
}

// Close closes the socket.
func (d *Dumper) Close() error { return d.conn.Close() }

// QdiscHooks dumps the namespace's qdiscs (RTM_GETQDISC) and returns the
// tc directions each device has: clsact gives ingress and egress, the
// older ingress qdisc ingress only. Only these devices can hold tc
// filters on those hooks, so TC is asked only for them.
func (d *Dumper) QdiscHooks() (map[uint32][]string, error) {
	out := map[uint32][]string{}
	err := d.dump("dumping qdiscs (RTM_GETQDISC)", unix.RTM_GETQDISC, 0, 0, unix.RTM_NEWQDISC, func(msg tcMsg, ad *mnl.AttributeDecoder) {
		for ad.Next() {
			if ad.Type() != unix.TCA_KIND {
				continue
			}
			switch ad.String() {
			case "clsact":
				out[uint32(msg.ifindex)] = []string{"ingress", "egress"}
			case "ingress":
				out[uint32(msg.ifindex)] = []string{"ingress"}
			}
		}
	})
	return out, err
}

// tcParents are the filter parents of the two clsact hooks (TC_H_MAKE of
// TC_H_CLSACT with TC_H_MIN_INGRESS or TC_H_MIN_EGRESS); the ingress
// qdisc answers for its one hook under the ingress parent.
var tcParents = map[string]uint32{"ingress": 0xfffffff2, "egress": 0xfffffff3}

// What golang.org/x/sys/unix lacks of the tc uapi, written by hand
// because the project keeps one netlink library (mdlayher's), whose
// packages have no tc types: struct tcmsg (include/uapi/linux/rtnetlink.h)
// and TCA_BPF_ID of enum in include/uapi/linux/pkt_cls.h.
const (
	sizeofTcMsg = 20
	tcaBPFID    = 11
)

// tcMsg is what the dumps use of struct tcmsg: family (AF_UNSPEC, 0),
// three bytes of padding, ifindex, handle, parent and info, in host byte
// order.
type tcMsg struct {
	ifindex int32
	parent  uint32
}

// marshal is the request's struct tcmsg.
func (m tcMsg) marshal() []byte {
	b := make([]byte, sizeofTcMsg)
	binary.NativeEndian.PutUint32(b[4:], uint32(m.ifindex))
	binary.NativeEndian.PutUint32(b[12:], m.parent)
	return b
}

// parseTcMsg reads the struct tcmsg at the start of a reply.
func parseTcMsg(b []byte) tcMsg {
	return tcMsg{ifindex: int32(binary.NativeEndian.Uint32(b[4:])), parent: binary.NativeEndian.Uint32(b[12:])}
}

// TC dumps the filters of one hook of a device (RTM_GETTFILTER) and
// returns its cls_bpf filters that run an eBPF program (TCA_BPF_ID), in
// the dump's order, which is the order they run in. Filters of other
// classifiers, and programs run as tc actions (act_bpf), are not
// returned. The kernel answers an empty dump for a device or qdisc gone
// since the qdisc dump.
func (d *Dumper) TC(ifindex uint32, direction string) ([]Attachment, error) {
	parent, ok := tcParents[direction]
	if !ok {
		return nil, fmt.Errorf("tc direction %q is neither ingress nor egress", direction)
	}
	var out []Attachment
	what := fmt.Sprintf("dumping the %s tc filters of device %d (RTM_GETTFILTER)", direction, ifindex)
	err := d.dump(what, unix.RTM_GETTFILTER, ifindex, parent, unix.RTM_NEWTFILTER, func(_ tcMsg, ad *mnl.AttributeDecoder) {
		bpf := false
		var id uint32
		for ad.Next() {
			switch ad.Type() {
			case unix.TCA_KIND:
				bpf = ad.String() == "bpf"
			case unix.TCA_OPTIONS:
				ad.Nested(func(nad *mnl.AttributeDecoder) error {
					for nad.Next() {
						if nad.Type() == tcaBPFID {
							id = nad.Uint32()
						}
					}
					return nil
				})
			}
		}
		if bpf && id != 0 {
			out = append(out, Attachment{Ifindex: ifindex, Kind: KindTC, Direction: direction, Order: len(out), Prog: ebpf.ProgramID(id)})
		}
	})
	return out, err
}

// dump runs one dump of tcmsg requests (ifindex and parent 0: all) and
// hands each reply of type want to each, its attributes walked in place.
// A dump interrupted by a concurrent change is run again, up to three
// times, as tc itself does not: a torn dump may miss a filter.
func (d *Dumper) dump(what string, cmd, ifindex, parent uint32, want mnl.HeaderType, each func(tcMsg, *mnl.AttributeDecoder)) error {
	req := tcMsg{ifindex: int32(ifindex), parent: parent}
	m := mnl.Message{
		Header: mnl.Header{Type: mnl.HeaderType(cmd), Flags: mnl.Request | mnl.Dump},
		Data:   req.marshal(),
	}
	var msgs []mnl.Message
	for try := 0; ; try++ {
		var err error
		if msgs, err = d.conn.Execute(m); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !slices.ContainsFunc(msgs, func(m mnl.Message) bool { return m.Header.Flags&mnl.DumpInterrupted != 0 }) {
			break
		}
		if try == 2 {
			return fmt.Errorf("%s: interrupted by changes 3 times in a row (NLM_F_DUMP_INTR)", what)
		}
	}
	for _, r := range msgs {
		if r.Header.Type != want || len(r.Data) < sizeofTcMsg {
			continue
		}
		err := nlattr.Decode(r.Data[sizeofTcMsg:], func(ad *mnl.AttributeDecoder) error {
			each(parseTcMsg(r.Data), ad)
			return nil
		})
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	return nil
}

// TCX queries both tcx hooks of a device (BPF_PROG_QUERY). A device gone
// since the link dump has none.
func TCX(ifindex uint32) ([]Attachment, error) {
	var out []Attachment
	for _, h := range []struct {
		direction string
		attach    ebpf.AttachType
	}{{"ingress", ebpf.AttachTCXIngress}, {"egress", ebpf.AttachTCXEgress}} {
		got, err := query(ifindex, KindTCX, h.direction, h.attach)
		if errors.Is(err, unix.ENODEV) {
			return nil, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, got...)
	}
	return out, nil
}

// Netkit queries the primary and peer programs of a netkit device
// (BPF_PROG_QUERY). Only a primary device holds programs: the peer end,
// and a device gone since the link dump, have none.
func Netkit(ifindex uint32) ([]Attachment, error) {
	var out []Attachment
	for _, h := range []struct {
		direction string
		attach    ebpf.AttachType
	}{{"primary", ebpf.AttachNetkitPrimary}, {"peer", ebpf.AttachNetkitPeer}} {
		got, err := query(ifindex, KindNetkit, h.direction, h.attach)
		// EACCES: the peer end, whose programs its primary holds;
		// EAGAIN: a primary whose peer is gone; ENXIO: the device
		// was replaced by one that is not netkit.
		if errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EACCES) || errors.Is(err, unix.ENXIO) {
			return nil, nil
		}
		if errors.Is(err, unix.EAGAIN) {
			continue
		}
		if err != nil {
			return out, err
		}
		out = append(out, got...)
	}
	return out, nil
}

func query(ifindex uint32, kind, direction string, attach ebpf.AttachType) ([]Attachment, error) {
	res, err := link.QueryPrograms(link.QueryOptions{Target: int(ifindex), Attach: attach})
	if err != nil {
		return nil, fmt.Errorf("querying the %s %s programs of device %d (BPF_PROG_QUERY): %w", kind, direction, ifindex, err)
	}
	out := make([]Attachment, 0, len(res.Programs))
	for i, p := range res.Programs {
		id, _ := p.LinkID()
		out = append(out, Attachment{Ifindex: ifindex, Kind: kind, Direction: direction, Order: i, Prog: p.ID, Link: id})
	}
	return out, nil
}
