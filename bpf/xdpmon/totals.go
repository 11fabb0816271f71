package xdpmon

import (
	"fmt"
	"maps"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
)

// DeviceAction is a device and an exception's action.
type DeviceAction struct {
	Device reap.Device
	Action uint32
}

// DeviceErrno is a device and a failed redirect's errno (negative).
type DeviceErrno struct {
	Device reap.Device
	Errno  int32
}

// totals are the counts of keys deleted with their programs, per device
// and action or errno, so that the device totals go on across reloads.
type totals struct {
	exceptions map[DeviceAction]uint64
	redirects  map[DeviceErrno]uint64
}

// deviceTotals adds the live counts to the retired ones, forgetting the
// retired counts of devices that are gone; device gives a key's device and
// whether the key counts in the totals.
func deviceTotals[K comparable](retired map[K]uint64, live []Count[K], device func(K) (reap.Device, bool), devFate func(reap.Device) reap.Fate) map[K]uint64 {
	out := maps.Clone(retired)
	for _, c := range live {
		if _, ok := device(c.Key); ok {
			out[c.Key] += c.Count
		}
	}
	for k := range out {
		if d, _ := device(k); devFate(d) == reap.Gone {
			delete(retired, k)
			delete(out, k)
		}
	}
	return out
}

// ExceptionTotals reads the exception counts per device, program and
// action, deleting the keys whose device or program is gone, and returns
// them per device and action over every program that ran there, including
// programs since replaced or unloaded.
func (m *Monitor) ExceptionTotals(devFate func(reap.Device) reap.Fate, live *reap.Liveness) (map[DeviceAction]uint64, error) {
	exc, gone, err := m.exceptions.read(func(k XdpmonExceptionKey) reap.Fate {
		return reap.Worst(devFate(k.Dev.Device()), live.Prog(k.ProgId))
	})
	for _, g := range gone {
		m.retired.exceptions[DeviceAction{g.Key.Dev.Device(), g.Key.Action}] += g.Count
	}
	byDevice := make([]Count[DeviceAction], len(exc))
	for i, e := range exc {
		byDevice[i] = Count[DeviceAction]{Key: DeviceAction{e.Key.Dev.Device(), e.Key.Action}, Count: e.Count}
	}
	return deviceTotals(m.retired.exceptions, byDevice, func(k DeviceAction) (reap.Device, bool) {
		return k.Device, true
	}, devFate), err
}

// RedirectTotals reads the redirect counts per device, program and errno
// (0: success, with Options.RedirectSuccess), deleting the keys whose
// device or program is gone, and returns them per program, and the failed
// ones per device and errno over every program that ran there, including
// programs since replaced or unloaded.
func (m *Monitor) RedirectTotals(devFate func(reap.Device) reap.Fate, live *reap.Liveness) ([]Count[XdpmonRedirectKey], map[DeviceErrno]uint64, error) {
	redir, gone, err := m.redirects.read(func(k XdpmonRedirectKey) reap.Fate {
		return reap.Worst(devFate(k.Dev.Device()), live.Prog(k.ProgId))
	})
	for _, g := range gone {
		if g.Key.Err != 0 {
			m.retired.redirects[DeviceErrno{g.Key.Dev.Device(), g.Key.Err}] += g.Count
		}
	}
	byDevice := make([]Count[DeviceErrno], len(redir))
	for i, r := range redir {
		byDevice[i] = Count[DeviceErrno]{Key: DeviceErrno{r.Key.Dev.Device(), r.Key.Err}, Count: r.Count}
	}
	return redir, deviceTotals(m.retired.redirects, byDevice, func(k DeviceErrno) (reap.Device, bool) {
		return k.Device, k.Errno != 0
	}, devFate), err
}

var actionNames = []string{"aborted", "drop", "pass", "tx", "redirect", "unknown"}

// ActionName names an action of xdp:xdp_exception as enum xdp_action
// does, in lower case as the rxq collector's verdicts; anything past
// XDP_REDIRECT is unknown.
func ActionName(a uint32) string { return actionNames[min(int(a), len(actionNames)-1)] }

// ErrnoName turns a negative kernel errno into its name (ENETDOWN). Where
// Linux has two names for one number, the kernel's XDP code uses
// EOPNOTSUPP, not the ENOTSUP that x/sys lists first.
func ErrnoName(err int32) string {
	e := syscall.Errno(-err)
	if e == unix.EOPNOTSUPP {
		return "EOPNOTSUPP"
	}
	if n := unix.ErrnoName(e); n != "" {
		return n
	}
	return fmt.Sprintf("errno%d", -err)
}
