// Package xdpmon is the monitor collector's BPF object (xdpmon.c): the xdp:*
// tracepoints of xdp_monitor as per-key counters. It loads and attaches
// the programs, and reads their maps as typed records, deleting the keys
// whose devices, programs or maps are gone.
package xdpmon

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/bpf/slots"
	"github.com/xdp-exporter/xdp_exporter/bpf/tracing"
)

// programs are the tracepoint programs and the prototypes they were written
// for. By default only the failure tracepoints are attached, which cost
// nothing while nothing fails; Options adds the others.
var programs = []tracing.Program{
	{Name: XdpmonProgXdpException, Params: []string{"struct net_device *", "struct bpf_prog *", "u32"}},
	{Name: XdpmonProgXdpRedirectErr, Params: []string{"struct net_device *", "struct bpf_prog *", "*", "int"}},
	// Kernels without xdp_redirect_map(_err) (6.18) trace map redirects
	// through xdp_redirect(_err).
	{Name: XdpmonProgXdpRedirectMapErr, Params: []string{"struct net_device *", "struct bpf_prog *", "*", "int"}, Superseded: true},
	{Name: XdpmonProgXdpRedirect, Params: []string{"struct net_device *", "struct bpf_prog *"}},
	{Name: XdpmonProgXdpRedirectMap, Params: []string{"struct net_device *", "struct bpf_prog *"}, Superseded: true},
	{Name: XdpmonProgXdpDevmapXmit, Params: []string{"struct net_device *", "struct net_device *", "int", "int", "int"}},
	{Name: XdpmonProgXdpBulkTx, Params: []string{"struct net_device *", "int", "int", "int"}},
	{Name: XdpmonProgXdpCpumapEnqueue, Params: []string{"int", "unsigned int", "unsigned int", "int"}},
	{Name: XdpmonProgXdpCpumapKthread, Params: []string{"int", "unsigned int", "unsigned int", "int", "struct xdp_cpumap_stats *"}},
}

var (
	xmitPrograms = map[string]bool{XdpmonProgXdpDevmapXmit: true, XdpmonProgXdpBulkTx: true,
		XdpmonProgXdpCpumapEnqueue: true, XdpmonProgXdpCpumapKthread: true}
	successPrograms = map[string]bool{XdpmonProgXdpRedirect: true, XdpmonProgXdpRedirectMap: true}
)

// overflowMaps names the map of each overflow counter.
var overflowMaps = map[XdpmonOvfMap]string{
	XdpmonOvfMapOVF_EXCEPTIONS:     XdpmonMapExceptions,
	XdpmonOvfMapOVF_REDIRECTS:      XdpmonMapRedirects,
	XdpmonOvfMapOVF_DEVMAP_XMIT:    XdpmonMapDevmapXmit,
	XdpmonOvfMapOVF_BULK_TX:        XdpmonMapBulkTx,
	XdpmonOvfMapOVF_CPUMAP_ENQUEUE: XdpmonMapCpumapEnqueue,
	XdpmonOvfMapOVF_CPUMAP_KTHREAD: XdpmonMapCpumapKthread,
}

// Options chooses the opt-in programs.
type Options struct {
	// Xmit attaches the bulk transmit tracepoints (devmap, XDP_TX bulk,
	// cpumap), a program run per bulk of forwarded frames.
	Xmit bool
	// RedirectSuccess attaches xdp:xdp_redirect, a program run per
	// redirected packet.
	RedirectSuccess bool
	// ForeignIdle is how long a key with a device of another network
	// namespace may count nothing before it is deleted; reap.DefaultIdle
	// when 0.
	ForeignIdle time.Duration
}

// Monitor is the loaded object.
type Monitor struct {
	*tracing.Set
	xmit       bool
	exceptions *hashTable[XdpmonExceptionKey]
	redirects  *hashTable[XdpmonRedirectKey]
	devmapXmit *slots.Table[XdpmonXmitKey, XdpmonXmitValue]
	bulkTx     *slots.Table[XdpmonBulkKey, XdpmonXmitValue]
	enqueue    *slots.Table[XdpmonEnqueueKey, XdpmonEnqueueValue]
	kthread    *slots.Table[XdpmonKthreadKey, XdpmonKthreadValue]
	retired    totals
}

// Spec is the object as compiled; tests change it before New.
func Spec() (*ebpf.CollectionSpec, error) { return LoadXdpmon() }

// New loads and attaches the programs opts asks for, each on its own (see
// tracing.Load).
func New(spec *ebpf.CollectionSpec, opts Options, logger *slog.Logger) (_ *Monitor, err error) {
	var progs []tracing.Program
	for _, p := range programs {
		if (xmitPrograms[p.Name] && !opts.Xmit) || (successPrograms[p.Name] && !opts.RedirectSuccess) {
			continue
		}
		progs = append(progs, p)
	}
	set, err := tracing.Load(logger, spec, progs, func(string) string { return "xdp" })
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, set.Close())
		}
	}()
	m := &Monitor{Set: set, xmit: opts.Xmit,
		retired:    totals{exceptions: map[DeviceAction]uint64{}, redirects: map[DeviceErrno]uint64{}},
		exceptions: newHashTable[XdpmonExceptionKey](set.Maps[XdpmonMapExceptions], opts.ForeignIdle),
		redirects:  newHashTable[XdpmonRedirectKey](set.Maps[XdpmonMapRedirects], opts.ForeignIdle)}
	mp := set.Maps
	if m.devmapXmit, err = slots.New[XdpmonXmitKey, XdpmonXmitValue](mp[XdpmonMapDevmapXmitOwners], mp[XdpmonMapDevmapXmitClaims], mp[XdpmonMapDevmapXmit], opts.ForeignIdle); err != nil {
		return nil, err
	}
	if m.bulkTx, err = slots.New[XdpmonBulkKey, XdpmonXmitValue](mp[XdpmonMapBulkTxOwners], mp[XdpmonMapBulkTxClaims], mp[XdpmonMapBulkTx], opts.ForeignIdle); err != nil {
		return nil, err
	}
	if m.enqueue, err = slots.New[XdpmonEnqueueKey, XdpmonEnqueueValue](mp[XdpmonMapCpumapEnqueueOwners], mp[XdpmonMapCpumapEnqueueClaims], mp[XdpmonMapCpumapEnqueue], opts.ForeignIdle); err != nil {
		return nil, err
	}
	if m.kthread, err = slots.New[XdpmonKthreadKey, XdpmonKthreadValue](mp[XdpmonMapCpumapKthreadOwners], mp[XdpmonMapCpumapKthreadClaims], mp[XdpmonMapCpumapKthread], opts.ForeignIdle); err != nil {
		return nil, err
	}
	return m, nil
}

// Xmit says whether the bulk transmit programs were asked for.
func (m *Monitor) Xmit() bool { return m.xmit }

// Device is the device of a key.
func (k XdpmonDevKey) Device() reap.Device { return reap.Device{Ifindex: k.Ifindex, Netns: k.Netns} }

// Count is one key of a per-CPU hash map with its counts summed over CPUs.
type Count[K comparable] struct {
	Key   K
	Count uint64
}

// Xmit is one slot table key's transmit counts, summed over CPUs.
type Xmit[K comparable] struct {
	Key K
	XdpmonXmitValue
}

func sumXmit[K comparable](e slots.Entry[K, XdpmonXmitValue]) XdpmonXmitValue {
	var t XdpmonXmitValue
	e.Each(func(_ int, v *XdpmonXmitValue) {
		t.Sent += v.Sent
		t.Drops += v.Drops
		t.Errors += v.Errors
		t.Bulks += v.Bulks
	})
	return t
}

func xmitActivity[K comparable](e slots.Entry[K, XdpmonXmitValue]) uint64 {
	t := sumXmit(e)
	return t.Sent + t.Drops + t.Bulks
}

// DevmapXmit reads xdp:xdp_devmap_xmit per pair of devices, freeing the
// slots of pairs fateOf finds gone.
func (m *Monitor) DevmapXmit(fateOf func(XdpmonXmitKey) reap.Fate) ([]Xmit[XdpmonXmitKey], error) {
	return readXmit(m.devmapXmit, fateOf)
}

// BulkTx reads xdp:xdp_bulk_tx per device.
func (m *Monitor) BulkTx(fateOf func(XdpmonBulkKey) reap.Fate) ([]Xmit[XdpmonBulkKey], error) {
	return readXmit(m.bulkTx, fateOf)
}

func readXmit[K comparable](t *slots.Table[K, XdpmonXmitValue], fateOf func(K) reap.Fate) ([]Xmit[K], error) {
	entries, err := t.Read(xmitActivity[K], fateOf)
	out := make([]Xmit[K], len(entries))
	for i, e := range entries {
		out[i] = Xmit[K]{Key: e.Key, XdpmonXmitValue: sumXmit(e)}
	}
	return out, err
}

// Enqueue is xdp:xdp_cpumap_enqueue of one cpumap and target CPU.
type Enqueue struct {
	Key XdpmonEnqueueKey
	XdpmonEnqueueValue
}

// CpumapEnqueue reads the enqueues per cpumap and target CPU, freeing the
// slots of maps that are gone.
func (m *Monitor) CpumapEnqueue(live *reap.Liveness) ([]Enqueue, error) {
	sum := func(e slots.Entry[XdpmonEnqueueKey, XdpmonEnqueueValue]) XdpmonEnqueueValue {
		var t XdpmonEnqueueValue
		e.Each(func(_ int, v *XdpmonEnqueueValue) {
			t.Processed += v.Processed
			t.Drops += v.Drops
			t.Bulks += v.Bulks
		})
		return t
	}
	entries, err := m.enqueue.Read(func(e slots.Entry[XdpmonEnqueueKey, XdpmonEnqueueValue]) uint64 {
		t := sum(e)
		return t.Processed + t.Drops + t.Bulks
	}, func(k XdpmonEnqueueKey) reap.Fate { return live.Map(k.MapId) })
	out := make([]Enqueue, len(entries))
	for i, e := range entries {
		out[i] = Enqueue{Key: e.Key, XdpmonEnqueueValue: sum(e)}
	}
	return out, err
}

// Kthread is xdp:xdp_cpumap_kthread of one cpumap on one CPU.
type Kthread struct {
	MapID uint32
	// CPU is the CPU the kthread ran on: a cpumap entry's kthread runs on
	// that entry's CPU, so the per-CPU copy is the entry.
	CPU int
	XdpmonKthreadValue
}

// CpumapKthread reads the kthread counts per cpumap and CPU, leaving out
// CPUs the map's kthreads never polled on, and freeing the slots of maps
// that are gone.
func (m *Monitor) CpumapKthread(live *reap.Liveness) ([]Kthread, error) {
	entries, err := m.kthread.Read(func(e slots.Entry[XdpmonKthreadKey, XdpmonKthreadValue]) uint64 {
		var n uint64
		e.Each(func(_ int, v *XdpmonKthreadValue) { n += v.Polls + v.Processed })
		return n
	}, func(k XdpmonKthreadKey) reap.Fate { return live.Map(uint32(k.MapId)) })
	var out []Kthread
	for _, e := range entries {
		var perCPU []XdpmonKthreadValue
		e.Each(func(cpu int, v *XdpmonKthreadValue) {
			if cpu >= len(perCPU) {
				perCPU = append(perCPU, make([]XdpmonKthreadValue, cpu+1-len(perCPU))...)
			}
			t := &perCPU[cpu]
			t.Processed += v.Processed
			t.Drops += v.Drops
			t.Sched += v.Sched
			t.XdpPass += v.XdpPass
			t.XdpDrop += v.XdpDrop
			t.XdpRedirect += v.XdpRedirect
			t.Polls += v.Polls
		})
		for cpu, v := range perCPU {
			if v.Polls > 0 {
				out = append(out, Kthread{MapID: uint32(e.Key.MapId), CPU: cpu, XdpmonKthreadValue: v})
			}
		}
	}
	return out, err
}

// Overflow is the count of events not counted because a map was full.
type Overflow struct {
	Map   string
	Count uint64
}

// Overflows reads the overflow counter of every map.
func (m *Monitor) Overflows() ([]Overflow, error) {
	var out []Overflow
	var errs []error
	for i := range XdpmonOvfMapOVF_MAX {
		n, err := slots.Counter(m.Maps[XdpmonMapOverflow], uint32(i))
		if err != nil {
			errs = append(errs, fmt.Errorf("reading overflow counter %s: %w", overflowMaps[i], err))
			continue
		}
		out = append(out, Overflow{Map: overflowMaps[i], Count: n})
	}
	return out, errors.Join(errs...)
}

func sum(xs []uint64) uint64 {
	var t uint64
	for _, x := range xs {
		t += x
	}
	return t
}
