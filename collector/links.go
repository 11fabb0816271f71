package collector

import (
	"context"
	"encoding/binary"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/btf"
	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

// Link is one network device of the exporter's namespace as one
// RTM_GETLINK dump saw it.
type Link struct {
	Index uint32
	// Name is the kernel's bytes, for ioctls; Label is what every
	// collector puts in its device label (deviceLabel).
	Name, Label string
	XDP         []xdpAttachment
	// RxQueues is IFLA_NUM_RX_QUEUES: the RX queues the device was made
	// with, an upper bound of the ones in use.
	RxQueues uint32
}

// Links is one dump of the namespace's devices. The scrape takes one per
// scrape and every collector reads the same (scrapeLinks), so a device
// never has a name in one family and none in another.
type Links struct {
	list    []Link
	byIndex map[uint32]int
	// partial says the dump failed part-way: a device it lacks may
	// still exist.
	partial bool
}

func newLinks(list []Link) *Links {
	l := &Links{list: list, byIndex: make(map[uint32]int, len(list))}
	for i := range list {
		l.list[i].Label = deviceLabel(list[i].Name)
		l.byIndex[list[i].Index] = i
	}
	return l
}

// All returns the devices in dump order.
func (l *Links) All() []Link { return l.list }

// Get returns the device with this ifindex.
func (l *Links) Get(ifindex uint32) (Link, bool) {
	i, ok := l.byIndex[ifindex]
	if !ok {
		return Link{}, false
	}
	return l.list[i], true
}

// ByName returns the device of this name.
func (l *Links) ByName(name string) (Link, bool) {
	for _, d := range l.list {
		if d.Name == name {
			return d, true
		}
	}
	return Link{}, false
}

// Label is the device label of an ifindex of the exporter's namespace:
// the device's label, or ifindex:N when the dump did not see it (it is
// gone, or appeared after the dump).
func (l *Links) Label(ifindex uint32) string {
	if d, ok := l.Get(ifindex); ok {
		return d.Label
	}
	return ifindexLabel(ifindex)
}

// The device label policy, the same in every collector (METRICS.md):
//   - a device of the exporter's network namespace is its name, with each
//     byte that is not UTF-8 written as \xNN (Linux allows any byte but
//     '/', ':' and white space; a label value must be UTF-8);
//   - one the exporter cannot name (gone, or not yet in the snapshot) is
//     ifindex:N;
//   - one of another namespace, which only the BPF collectors see, is
//     netns:INODE/ followed by the name its program recorded, or by
//     ifindex:N where the program records none.
func deviceLabel(name string) string { return validLabel(name) }

func ifindexLabel(ifindex uint32) string { return "ifindex:" + strconv.FormatUint(uint64(ifindex), 10) }

func foreignLabel(netns uint64, rest string) string {
	return "netns:" + strconv.FormatUint(netns, 10) + "/" + rest
}

type linksKey struct{}

// linkSnapshot is the scrape's dump, taken by the first collector that
// asks for it.
type linkSnapshot struct {
	once  sync.Once
	links *Links
	err   error
}

// withLinkSnapshot gives the scrape's collectors one shared dump; a
// context that already carries one keeps it.
func withLinkSnapshot(ctx context.Context) context.Context {
	if _, ok := ctx.Value(linksKey{}).(*linkSnapshot); ok {
		return ctx
	}
	return context.WithValue(ctx, linksKey{}, &linkSnapshot{})
}

// scrapeLinks returns the scrape's dump, or a fresh one when ctx belongs
// to no scrape (a collector updated directly).
func scrapeLinks(ctx context.Context) (*Links, error) {
	s, ok := ctx.Value(linksKey{}).(*linkSnapshot)
	if !ok {
		return dumpLinks()
	}
	s.once.Do(func() { s.links, s.err = dumpLinks() })
	return s.links, s.err
}

// dumpLinks dumps the links of the current network namespace. The XDP
// programs are read per mode because a device may hold a program in more
// than one mode at once (XDP_ATTACHED_MULTI, offload next to native or
// generic), in which case the kernel omits IFLA_XDP_PROG_ID.
func dumpLinks() (*Links, error) {
	conn, err := netlink.Dial(unix.NETLINK_ROUTE, nil)
	if err != nil {
		return nil, fmt.Errorf("dumping links: opening a route netlink socket: %w", err)
	}
	defer conn.Close()
	// Without the link statistics (IFLA_STATS, IFLA_STATS64), which
	// nothing here reads, each message is about half the size.
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(unix.IFLA_EXT_MASK, rtextFilterSkipStats)
	attrs, err := ae.Encode()
	if err != nil {
		return nil, err
	}
	req := netlink.Message{
		Header: netlink.Header{Type: unix.RTM_GETLINK, Flags: netlink.Request | netlink.Dump},
		Data:   append(ifinfomsg(unix.AF_UNSPEC, 0), attrs...),
	}
	// A dump interrupted by a concurrent link change (NLM_F_DUMP_INTR) may
	// miss or repeat devices, so it is retried; a dump takes well under a
	// millisecond, and with interfaces churning (containers starting) three
	// tries in a row were seen interrupted.
	var msgs []netlink.Message
	interrupted := false
	for range 10 {
		if msgs, err = conn.Execute(req); err != nil {
			return nil, fmt.Errorf("dumping links (RTM_GETLINK): %w", err)
		}
		interrupted = slices.ContainsFunc(msgs, func(m netlink.Message) bool { return m.Header.Flags&netlink.DumpInterrupted != 0 })
		if !interrupted {
			break
		}
	}
	list := make([]Link, 0, len(msgs))
	seen := make(map[uint32]bool, len(msgs))
	for _, m := range msgs {
		if m.Header.Type != unix.RTM_NEWLINK {
			continue
		}
		l, perr := parseLink(m.Data)
		if perr != nil {
			return nil, perr
		}
		if !seen[l.Index] {
			seen[l.Index] = true
			list = append(list, l)
		}
	}
	links := newLinks(list)
	if interrupted {
		links.partial = true
		return links, fmt.Errorf("dumping links (RTM_GETLINK): interrupted by link changes 10 times in a row (NLM_F_DUMP_INTR)")
	}
	return links, nil
}

// ifinfomsg is struct ifinfomsg (include/uapi/linux/rtnetlink.h) of a
// request about device index (0: all), in host byte order as netlink
// wants it.
func ifinfomsg(family uint8, index int32) []byte {
	b := make([]byte, unix.SizeofIfInfomsg)
	b[0] = family
	binary.NativeEndian.PutUint32(b[4:8], uint32(index))
	return b
}

// rtextFilterSkipStats is RTEXT_FILTER_SKIP_STATS of
// include/uapi/linux/rtnetlink.h (Linux 4.18; older kernels ignore it).
const rtextFilterSkipStats = 1 << 3

// parseLink decodes one RTM_NEWLINK message: struct ifinfomsg, then the
// attributes, walked in place.
func parseLink(m []byte) (Link, error) {
	if len(m) < unix.SizeofIfInfomsg {
		return Link{}, fmt.Errorf("RTM_NEWLINK message of %d bytes is shorter than ifinfomsg", len(m))
	}
	index := int32(binary.NativeEndian.Uint32(m[4:8]))
	l := Link{Index: uint32(index)}
	err := nlattr.Decode(m[unix.SizeofIfInfomsg:], func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			switch ad.Type() {
			case unix.IFLA_IFNAME:
				l.Name = ad.String()
			case unix.IFLA_NUM_RX_QUEUES:
				l.RxQueues = ad.Uint32()
			case unix.IFLA_XDP:
				ad.Nested(func(nad *netlink.AttributeDecoder) error {
					for nad.Next() {
						for _, mode := range xdpModes {
							if nad.Type() == mode.attr && len(nad.Bytes()) >= 4 {
								if id := nad.Uint32(); id != 0 {
									l.XDP = append(l.XDP, xdpAttachment{ifindex: int(l.Index), mode: mode.name, progID: ebpf.ProgramID(id)})
								}
							}
						}
					}
					return nil
				})
			}
		}
		return nil
	})
	if err != nil {
		return l, fmt.Errorf("parsing link %d attributes: %w", index, err)
	}
	for i := range l.XDP {
		l.XDP[i].device = deviceLabel(l.Name)
	}
	return l, nil
}

// deviceFilter is the device filter policy of every collector that has
// --collector.NAME.device-include/-exclude: both are regexps matched
// against the whole device label ("eth0" does not select "veth0"), include
// first (empty: every device), then exclude.
type deviceFilter struct{ include, exclude *regexp.Regexp }

func newDeviceFilter(include, exclude *regexp.Regexp) deviceFilter {
	return deviceFilter{include: anchor(include), exclude: anchor(exclude)}
}

// anchor makes a user's regexp match whole names. An empty regexp stays
// nil (no filter).
func anchor(re *regexp.Regexp) *regexp.Regexp {
	if re == nil || re.String() == "" {
		return nil
	}
	return regexp.MustCompile("^(?:" + re.String() + ")$")
}

// selects reports whether the filter keeps label. Series of no device
// (label "": an orphaned page pool, an unbound AF_XDP socket, a dropped
// skb without one) are kept unless device-include names the devices
// wanted.
func (f deviceFilter) selects(label string) bool {
	if label == "" {
		return f.include == nil
	}
	if f.include != nil && !f.include.MatchString(label) {
		return false
	}
	return f.exclude == nil || !f.exclude.MatchString(label)
}

// kernelBTF loads the running kernel's BTF, which the tp_btf programs of
// the xdp and napi collectors are typed and relocated against; without it
// the error says so once, instead of every program failing on its own.
func kernelBTF(collector string) (*btf.Spec, error) {
	spec, err := btf.LoadKernelSpec()
	if err != nil {
		return nil, Unsupported("kernel BTF (/sys/kernel/btf/vmlinux) unavailable; the %s collector's tp_btf programs need a kernel built with CONFIG_DEBUG_INFO_BTF: %w", collector, err)
	}
	return spec, nil
}

// ownNetns returns the inode of the exporter's network namespace, which
// the BPF programs record with every device.
func ownNetns() (uint64, error) {
	var st unix.Stat_t
	if err := unix.Stat("/proc/self/ns/net", &st); err != nil {
		return 0, fmt.Errorf("reading the exporter's network namespace: %w", err)
	}
	return st.Ino, nil
}
