package collector

import (
	"errors"
	"strconv"
	"sync"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/collector/internal/labelvalue"
	"github.com/xdp-exporter/xdp_exporter/internal/kernel/rtnl"
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
	// Kind is the device's IFLA_INFO_KIND (veth, netkit), empty for a
	// physical device.
	Kind string
}

// Links is one dump of the namespace's devices. The scrape takes one per
// scrape and every collector reads the same (LinkSnapshot), so a device
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
func deviceLabel(name string) string { return labelvalue.Escape(name) }

func ifindexLabel(ifindex uint32) string { return "ifindex:" + strconv.FormatUint(uint64(ifindex), 10) }

func foreignLabel(netns uint64, rest string) string {
	return "netns:" + strconv.FormatUint(netns, 10) + "/" + rest
}

// LinkSnapshot is one scrape's dump of the namespace's devices, taken by
// the first collector that asks for it (Get), so that every collector of
// the scrape names a device the same way.
type LinkSnapshot struct {
	once  sync.Once
	links *Links
	err   error
}

// NewLinkSnapshot is the dump of a new scrape, not taken yet.
func NewLinkSnapshot() *LinkSnapshot { return &LinkSnapshot{} }

// Get dumps the links on the first call and returns that dump on every
// call.
func (s *LinkSnapshot) Get() (*Links, error) {
	s.once.Do(func() { s.links, s.err = dumpLinks() })
	return s.links, s.err
}

// dumpLinks dumps the links of the current network namespace (rtnl).
// An interrupted dump returns what it read, partial, with the error.
func dumpLinks() (*Links, error) {
	list, err := rtnl.Dump()
	if list == nil {
		return nil, err
	}
	links := make([]Link, len(list))
	for i, l := range list {
		links[i] = Link{Index: l.Index, Name: l.Name, RxQueues: l.RxQueues, Kind: l.Kind}
		for _, x := range l.XDP {
			links[i].XDP = append(links[i].XDP, xdpAttachment{ifindex: int(l.Index), device: deviceLabel(l.Name), mode: x.Mode, progID: ebpf.ProgramID(x.ProgID)})
		}
	}
	out := newLinks(links)
	out.partial = errors.Is(err, rtnl.ErrDumpInterrupted)
	return out, err
}
