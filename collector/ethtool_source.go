package collector

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// ethtoolDevice is one interface the source can query.
type ethtoolDevice struct {
	Name, Label string // as in Link
	Index       int
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
	// Devices lists the devices of the scrape's link snapshot.
	Devices(ctx context.Context) ([]ethtoolDevice, error)
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
// It issues the ethtool ioctls itself, on its own socket, with the
// structures of safchain/ethtool (Channels, Ring) and golang.org/x/sys
// (GDRVINFO). safchain's own calls cannot be used from the scrape's worker
// goroutines: they pass the address of a stack variable to the kernel as a
// uintptr inside struct ifreq, and when the goroutine's stack grows before
// the syscall the kernel writes into the old stack (observed here:
// GDRVINFO returning an empty driver and zero stats from a fresh
// goroutine). Its Stats call also re-reads the whole string set on every
// call and returns a map, losing the driver's order and duplicate names.
type kernelEthtool struct {
	fd   int
	bufs guardPool
}

func newKernelEthtool() (*kernelEthtool, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the ethtool socket: %w", err)
	}
	return &kernelEthtool{fd: fd}, nil
}

func (k *kernelEthtool) Close() error {
	k.bufs.close()
	return unix.Close(k.fd)
}

func (k *kernelEthtool) Devices(ctx context.Context) ([]ethtoolDevice, error) {
	links, err := scrapeLinks(ctx)
	if links == nil {
		return nil, err
	}
	out := make([]ethtoolDevice, len(links.All()))
	for i, l := range links.All() {
		out[i] = ethtoolDevice{Name: l.Name, Label: l.Label, Index: int(l.Index)}
	}
	return out, err
}

func (k *kernelEthtool) DriverInfo(dev string) (ethtoolDriverInfo, error) {
	d, err := unix.IoctlGetEthtoolDrvinfo(k.fd, dev)
	if err != nil {
		return ethtoolDriverInfo{}, err
	}
	return ethtoolDriverInfo{
		Driver: unix.ByteSliceToString(d.Driver[:]), Version: unix.ByteSliceToString(d.Version[:]),
		FirmwareVersion: unix.ByteSliceToString(d.Fw_version[:]), BusInfo: unix.ByteSliceToString(d.Bus_info[:]),
		NStats: int(d.N_stats), NPrivFlags: int(d.N_priv_flags),
	}, nil
}

func (k *kernelEthtool) Channels(dev string) (ethtool.Channels, error) {
	v := ethtool.Channels{Cmd: ethtool.ETHTOOL_GCHANNELS}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v, err
}

func (k *kernelEthtool) Ring(dev string) (ethtool.Ring, error) {
	v := ethtool.Ring{Cmd: ethtool.ETHTOOL_GRINGPARAM}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v, err
}

// PrivFlagNames reads the ETH_SS_PRIV_FLAGS strings; their index is the
// flag's bit in ETHTOOL_GPFLAGS.
func (k *kernelEthtool) PrivFlagNames(dev string) ([]string, error) {
	info, err := k.DriverInfo(dev)
	if err != nil {
		return nil, err
	}
	return k.strings(dev, ethSSPrivFlags, info.NPrivFlags)
}

const (
	ethtoolGStrings = 0x1b // ETHTOOL_GSTRINGS
	ethtoolGStats   = 0x1d // ETHTOOL_GSTATS
	ethtoolGPFlags  = 0x27 // ETHTOOL_GPFLAGS
	ethSSStats      = 1    // ETH_SS_STATS
	ethSSPrivFlags  = 2    // ETH_SS_PRIV_FLAGS
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

func (k *kernelEthtool) StatNames(dev string, n int) ([]string, error) {
	return k.strings(dev, ethSSStats, n)
}

// strings issues ETHTOOL_GSTRINGS for a string set. The kernel writes as
// many strings as the driver has now, whatever length we pass, so the
// buffer ends at a guard page: a set that grew since GDRVINFO makes the
// copy fail with EFAULT instead of overwriting our memory.
func (k *kernelEthtool) strings(dev string, set uint32, n int) ([]string, error) {
	const hdr = 12 // struct ethtool_gstrings: cmd, string_set, len
	b, mem, err := k.bufs.get(hdr + n*ethGStringLen)
	if err != nil {
		return nil, err
	}
	defer k.bufs.put(b)
	binary.NativeEndian.PutUint32(mem[0:], ethtoolGStrings)
	binary.NativeEndian.PutUint32(mem[4:], set)
	binary.NativeEndian.PutUint32(mem[8:], uint32(n))
	err = k.ioctl(dev, unsafe.Pointer(&mem[0]))
	if got := int(binary.NativeEndian.Uint32(mem[8:])); got != n && (err == nil || errors.Is(err, unix.EFAULT)) {
		return nil, countChanged("strings", got, n, err)
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

// countChanged is the error of a string or stat read whose count moved
// since GDRVINFO, keeping the ioctl's own error: EFAULT says the guard page
// stopped the kernel's copy.
func countChanged(what string, got, want int, ioctlErr error) error {
	if ioctlErr != nil {
		return fmt.Errorf("%w: %d %s, expected %d: %w", errStatsChanged, got, what, want, ioctlErr)
	}
	return fmt.Errorf("%w: %d %s, expected %d", errStatsChanged, got, what, want)
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
		return dst, countChanged("stats", got, n, err)
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
