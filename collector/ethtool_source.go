package collector

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// ethtoolDevice is one interface the source can query.
type ethtoolDevice struct {
	Name  string
	Index int
}

// ethtoolDriverInfo is the part of ETHTOOL_GDRVINFO the collector uses: the
// _info labels and the sizes of the stats and private-flag string sets,
// which key the string-set cache.
type ethtoolDriverInfo struct {
	Driver, Version, FirmwareVersion, BusInfo string
	NStats, NPrivFlags                        int
}

// errStatsChanged says the driver's stat count changed between the
// collector's ETHTOOL_GDRVINFO and ETHTOOL_GSTATS (ethtool -L, a driver
// reconfiguring itself): the cached names no longer describe the values.
var errStatsChanged = errors.New("ethtool stat count changed")

// ethtoolSource is everything the collector asks of the kernel. The
// kernel implementation issues one ioctl per call; the fixture source in
// the tests answers from captured `ethtool` output.
type ethtoolSource interface {
	Devices() ([]ethtoolDevice, error)
	DriverInfo(dev string) (ethtoolDriverInfo, error)
	// StatNames returns the ETH_SS_STATS strings in driver order.
	StatNames(dev string, n int) ([]string, error)
	// Stats reads the n stat values into dst (reusing its storage) and
	// returns errStatsChanged when the driver now has a different count.
	Stats(dev string, n int, dst []uint64) ([]uint64, error)
	Channels(dev string) (ethtool.Channels, error)
	Ring(dev string) (ethtool.Ring, error)
	// PrivFlagNames returns the private flag names indexed by bit.
	PrivFlagNames(dev string) ([]string, error)
	PrivFlags(dev string) (uint32, error)
	Close() error
}

// kernelEthtool is the ethtoolSource for the running kernel.
//
// safchain/ethtool covers GDRVINFO, GCHANNELS, GRINGPARAM and the private
// flag names. Its Stats call, however, re-reads the whole string set on
// every call (GDRVINFO + GSTRINGS + GSTATS, and a map from name to value),
// which is what makes a scrape slow on a NIC with thousands of stats and
// loses the driver's order and duplicate names. So GSTRINGS and GSTATS, and
// GPFLAGS without re-reading its names, are issued here by hand on a socket
// of our own.
type kernelEthtool struct {
	lib  *ethtool.Ethtool
	fd   int
	bufs guardPool
}

func newKernelEthtool() (*kernelEthtool, error) {
	lib, err := ethtool.NewEthtool()
	if err != nil {
		return nil, fmt.Errorf("opening the ethtool socket: %w", err)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		lib.Close()
		return nil, fmt.Errorf("opening the ethtool socket: %w", err)
	}
	return &kernelEthtool{lib: lib, fd: fd}, nil
}

func (k *kernelEthtool) Close() error {
	k.lib.Close()
	k.bufs.close()
	return unix.Close(k.fd)
}

func (k *kernelEthtool) Devices() ([]ethtoolDevice, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return nil, err
	}
	out := make([]ethtoolDevice, len(ifs))
	for i, ifc := range ifs {
		out[i] = ethtoolDevice{Name: ifc.Name, Index: ifc.Index}
	}
	return out, nil
}

func (k *kernelEthtool) DriverInfo(dev string) (ethtoolDriverInfo, error) {
	d, err := k.lib.DriverInfo(dev)
	if err != nil {
		return ethtoolDriverInfo{}, err
	}
	return ethtoolDriverInfo{
		Driver: d.Driver, Version: d.Version, FirmwareVersion: d.FwVersion, BusInfo: d.BusInfo,
		NStats: int(d.NStats), NPrivFlags: int(d.NPrivFlags),
	}, nil
}

func (k *kernelEthtool) Channels(dev string) (ethtool.Channels, error) { return k.lib.GetChannels(dev) }
func (k *kernelEthtool) Ring(dev string) (ethtool.Ring, error)         { return k.lib.GetRing(dev) }

func (k *kernelEthtool) PrivFlagNames(dev string) ([]string, error) {
	m, err := k.lib.PrivFlagsNames(dev)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(m))
	for name := range m {
		out = append(out, name)
	}
	sort.Slice(out, func(i, j int) bool { return m[out[i]] < m[out[j]] })
	return out, nil
}

const (
	ethtoolGStrings = 0x1b // ETHTOOL_GSTRINGS
	ethtoolGStats   = 0x1d // ETHTOOL_GSTATS
	ethtoolGPFlags  = 0x27 // ETHTOOL_GPFLAGS
	ethSSStats      = 1    // ETH_SS_STATS
	ethGStringLen   = 32   // ETH_GSTRING_LEN
)

// ifreqData is struct ifreq with its ifr_data member, as SIOCETHTOOL takes it.
type ifreqData struct {
	name [unix.IFNAMSIZ]byte
	data unsafe.Pointer
	_    [24 - unsafe.Sizeof(uintptr(0))]byte
}

func (k *kernelEthtool) ioctl(dev string, data unsafe.Pointer) error {
	if len(dev) >= unix.IFNAMSIZ {
		return fmt.Errorf("interface name %q too long", dev)
	}
	ifr := ifreqData{data: data}
	copy(ifr.name[:], dev)
	if _, _, errno := unix.Syscall(unix.SYS_IOCTL, uintptr(k.fd), unix.SIOCETHTOOL, uintptr(unsafe.Pointer(&ifr))); errno != 0 {
		return errno
	}
	return nil
}

func (k *kernelEthtool) PrivFlags(dev string) (uint32, error) {
	v := struct{ cmd, data uint32 }{cmd: ethtoolGPFlags}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v.data, err
}

// StatNames issues ETHTOOL_GSTRINGS for the stats set. The kernel writes as
// many strings as the driver has now, whatever length we pass, so the
// buffer ends at a guard page: a set that grew since GDRVINFO makes the
// copy fail with EFAULT instead of overwriting our memory.
func (k *kernelEthtool) StatNames(dev string, n int) ([]string, error) {
	const hdr = 12 // struct ethtool_gstrings: cmd, string_set, len
	b, mem, err := k.bufs.get(hdr + n*ethGStringLen)
	if err != nil {
		return nil, err
	}
	defer k.bufs.put(b)
	binary.NativeEndian.PutUint32(mem[0:], ethtoolGStrings)
	binary.NativeEndian.PutUint32(mem[4:], ethSSStats)
	binary.NativeEndian.PutUint32(mem[8:], uint32(n))
	err = k.ioctl(dev, unsafe.Pointer(&mem[0]))
	if got := int(binary.NativeEndian.Uint32(mem[8:])); got != n && (err == nil || errors.Is(err, unix.EFAULT)) {
		return nil, fmt.Errorf("%w: %d strings, expected %d", errStatsChanged, got, n)
	}
	if err != nil {
		return nil, err
	}
	names := make([]string, n)
	for i := range names {
		s := mem[hdr+i*ethGStringLen : hdr+(i+1)*ethGStringLen]
		for j, c := range s {
			if c == 0 {
				s = s[:j]
				break
			}
		}
		names[i] = string(s)
	}
	return names, nil
}

// Stats issues ETHTOOL_GSTATS into a guard-page buffer (see StatNames) and
// copies the values into dst.
func (k *kernelEthtool) Stats(dev string, n int, dst []uint64) ([]uint64, error) {
	const hdr = 8 // struct ethtool_stats: cmd, n_stats
	b, mem, err := k.bufs.get(hdr + n*8)
	if err != nil {
		return dst, err
	}
	defer k.bufs.put(b)
	binary.NativeEndian.PutUint32(mem[0:], ethtoolGStats)
	binary.NativeEndian.PutUint32(mem[4:], uint32(n))
	err = k.ioctl(dev, unsafe.Pointer(&mem[0]))
	if got := int(binary.NativeEndian.Uint32(mem[4:])); got != n && (err == nil || errors.Is(err, unix.EFAULT)) {
		return dst, fmt.Errorf("%w: %d stats, expected %d", errStatsChanged, got, n)
	}
	if err != nil {
		return dst, err
	}
	// The region starts 8-byte aligned (see guardBuf.tail), so the values are.
	vals := unsafe.Slice((*uint64)(unsafe.Pointer(&mem[hdr])), n)
	return append(dst[:0], vals...), nil
}

// guardBuf is an anonymous mapping whose last page is PROT_NONE.
type guardBuf struct {
	mem  []byte
	size int // usable bytes before the guard page
}

// tail returns the last n usable bytes, which end right at the guard page.
// size is page-aligned, so the start is aligned as n is.
func (g *guardBuf) tail(n int) []byte { return g.mem[g.size-n : g.size] }

// guardPool recycles guard buffers between scrapes: there are at most as
// many as ioctls in flight at once.
type guardPool struct {
	mu     sync.Mutex
	free   []*guardBuf
	closed bool
}

func (p *guardPool) get(n int) (*guardBuf, []byte, error) {
	n = (n + 7) &^ 7
	p.mu.Lock()
	var g *guardBuf
	if l := len(p.free); l > 0 {
		g, p.free = p.free[l-1], p.free[:l-1]
	}
	p.mu.Unlock()
	if g != nil && g.size < n {
		_ = unix.Munmap(g.mem)
		g = nil
	}
	if g == nil {
		page := os.Getpagesize()
		size := (n + page - 1) / page * page
		mem, err := unix.Mmap(-1, 0, size+page, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
		if err != nil {
			return nil, nil, fmt.Errorf("mapping an ethtool buffer: %w", err)
		}
		if err := unix.Mprotect(mem[size:], unix.PROT_NONE); err != nil {
			_ = unix.Munmap(mem)
			return nil, nil, fmt.Errorf("protecting an ethtool buffer: %w", err)
		}
		g = &guardBuf{mem: mem, size: size}
	}
	return g, g.tail(n), nil
}

func (p *guardPool) put(g *guardBuf) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		_ = unix.Munmap(g.mem)
		return
	}
	p.free = append(p.free, g)
}

func (p *guardPool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, g := range p.free {
		_ = unix.Munmap(g.mem)
	}
	p.free, p.closed = nil, true
}
