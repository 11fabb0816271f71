// Package ethtoolioctl issues the ethtool ioctls the exporter reads a
// device's driver info, statistics, channels, rings and private flags
// with, into buffers that end at a guard page.
package ethtoolioctl

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"sync"
	"unsafe"

	"github.com/safchain/ethtool"
	"golang.org/x/sys/unix"
)

// DriverInfo is the part of ETHTOOL_GDRVINFO the exporter uses: the
// _info labels and the sizes of the stats and private-flag string sets,
// which key the string-set cache.
type DriverInfo struct {
	Driver, Version, FirmwareVersion, BusInfo string
	NStats, NPrivFlags                        int
}

// ErrStatsChanged says the driver's stat count changed between the
// caller's ETHTOOL_GDRVINFO and ETHTOOL_GSTATS (ethtool -L, a driver
// reconfiguring itself): the cached names no longer describe the values.
var ErrStatsChanged = errors.New("ethtool stat count changed")

// Conn issues the ethtool ioctls (SIOCETHTOOL) for the running kernel.
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
type Conn struct {
	fd   int
	bufs guardPool
}

// Open opens the socket the ioctls go through.
func Open() (*Conn, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("opening the ethtool socket: %w", err)
	}
	return &Conn{fd: fd}, nil
}

// Close closes the socket and unmaps the buffers.
func (k *Conn) Close() error {
	k.bufs.close()
	return unix.Close(k.fd)
}

// DriverInfo is ETHTOOL_GDRVINFO.
func (k *Conn) DriverInfo(dev string) (DriverInfo, error) {
	d, err := unix.IoctlGetEthtoolDrvinfo(k.fd, dev)
	if err != nil {
		return DriverInfo{}, err
	}
	return DriverInfo{
		Driver: unix.ByteSliceToString(d.Driver[:]), Version: unix.ByteSliceToString(d.Version[:]),
		FirmwareVersion: unix.ByteSliceToString(d.Fw_version[:]), BusInfo: unix.ByteSliceToString(d.Bus_info[:]),
		NStats: int(d.N_stats), NPrivFlags: int(d.N_priv_flags),
	}, nil
}

// Channels is ETHTOOL_GCHANNELS.
func (k *Conn) Channels(dev string) (ethtool.Channels, error) {
	v := ethtool.Channels{Cmd: ethtool.ETHTOOL_GCHANNELS}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v, err
}

// Ring is ETHTOOL_GRINGPARAM.
func (k *Conn) Ring(dev string) (ethtool.Ring, error) {
	v := ethtool.Ring{Cmd: ethtool.ETHTOOL_GRINGPARAM}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v, err
}

// PrivFlagNames reads the ETH_SS_PRIV_FLAGS strings; their index is the
// flag's bit in ETHTOOL_GPFLAGS.
func (k *Conn) PrivFlagNames(dev string) ([]string, error) {
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

func (k *Conn) ioctl(dev string, data unsafe.Pointer) error {
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

// PrivFlags is ETHTOOL_GPFLAGS: bit i is the flag PrivFlagNames names i.
func (k *Conn) PrivFlags(dev string) (uint32, error) {
	v := struct{ cmd, data uint32 }{cmd: ethtoolGPFlags}
	err := k.ioctl(dev, unsafe.Pointer(&v))
	return v.data, err
}

// StatNames reads the n ETH_SS_STATS strings in driver order.
func (k *Conn) StatNames(dev string, n int) ([]string, error) {
	return k.strings(dev, ethSSStats, n)
}

// strings issues ETHTOOL_GSTRINGS for a string set. The kernel writes as
// many strings as the driver has now, whatever length we pass, so the
// buffer ends at a guard page: a set that grew since GDRVINFO makes the
// copy fail with EFAULT instead of overwriting our memory.
func (k *Conn) strings(dev string, set uint32, n int) ([]string, error) {
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
		return fmt.Errorf("%w: %d %s, expected %d: %w", ErrStatsChanged, got, what, want, ioctlErr)
	}
	return fmt.Errorf("%w: %d %s, expected %d", ErrStatsChanged, got, what, want)
}

// Stats issues ETHTOOL_GSTATS into a guard-page buffer (see StatNames) and
// copies the values into dst.
func (k *Conn) Stats(dev string, n int, dst []uint64) ([]uint64, error) {
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
