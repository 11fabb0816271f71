// Package caps drops Linux capabilities from every thread of the process.
//
// The exporter needs CAP_BPF, CAP_PERFMON and CAP_NET_ADMIN to load and
// attach its programs, which the collectors do in their constructors. After
// that most collectors read already-open map, perf and socket fds, which
// needs no capability at all; Drop removes what is no longer needed so that a
// compromised exporter cannot load programs or reconfigure the network.
//
// Capabilities are per thread in Linux, and capset(2) and prctl(2) change
// only the calling thread. The Go runtime runs goroutines on many threads, so
// Drop goes through libcap's psx package, which applies each call to every
// thread of the process: without cgo through syscall.AllThreadsSyscall, which
// stops the world; with cgo (a plain `go build` where a C compiler is
// installed), where AllThreadsSyscall refuses, by signalling each pthread,
// which psx tracks by wrapping pthread_create. Threads created later inherit
// the result either way.
package caps

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"
)

// Set is a bit set of capabilities, bit n for capability number n.
type Set uint64

// Of returns the set holding the given capability numbers (unix.CAP_*).
func Of(caps ...int) Set {
	var s Set
	for _, c := range caps {
		s |= 1 << uint(c)
	}
	return s
}

// Has reports whether c is in s.
func (s Set) Has(c int) bool { return s&(1<<uint(c)) != 0 }

// String lists the set by name, e.g. "cap_net_admin,cap_bpf".
func (s Set) String() string {
	var names []string
	for c := 0; c < 64; c++ {
		if s.Has(c) {
			names = append(names, Name(c))
		}
	}
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ",")
}

// names covers the capabilities the exporter and its documentation talk
// about; any other prints as its number.
var names = map[int]string{
	unix.CAP_NET_ADMIN:        "cap_net_admin",
	unix.CAP_NET_RAW:          "cap_net_raw",
	unix.CAP_SYS_ADMIN:        "cap_sys_admin",
	unix.CAP_SYS_RESOURCE:     "cap_sys_resource",
	unix.CAP_PERFMON:          "cap_perfmon",
	unix.CAP_BPF:              "cap_bpf",
	unix.CAP_SETPCAP:          "cap_setpcap",
	unix.CAP_NET_BIND_SERVICE: "cap_net_bind_service",
	unix.CAP_DAC_OVERRIDE:     "cap_dac_override",
}

// Name returns the conventional lower-case name of capability c.
func Name(c int) string {
	if n, ok := names[c]; ok {
		return n
	}
	return "cap_" + strconv.Itoa(c)
}

// State is one thread's five capability sets.
type State struct {
	Effective, Permitted, Inheritable, Bounding, Ambient Set
}

// Current reads the calling thread's capability sets from capget(2) and
// /proc/thread-self/status.
func Current() (State, error) {
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capget(&hdr, &data[0]); err != nil {
		return State{}, fmt.Errorf("capget: %w", err)
	}
	st := State{
		Effective:   Set(data[0].Effective) | Set(data[1].Effective)<<32,
		Permitted:   Set(data[0].Permitted) | Set(data[1].Permitted)<<32,
		Inheritable: Set(data[0].Inheritable) | Set(data[1].Inheritable)<<32,
	}
	status, err := ReadStatus("/proc/thread-self/status")
	if err != nil {
		return State{}, err
	}
	st.Bounding, st.Ambient = status.Bounding, status.Ambient
	return st, nil
}

// ReadStatus parses the Cap* lines of a /proc/<pid>/status or
// /proc/<pid>/task/<tid>/status file.
func ReadStatus(path string) (State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return State{}, err
	}
	st, err := parseStatus(b)
	if err != nil {
		return State{}, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// parseStatus reads the five Cap* lines of a status file; each must appear
// once, as 64-bit hex.
func parseStatus(b []byte) (State, error) {
	var st State
	fields := map[string]*Set{
		"CapInh": &st.Inheritable, "CapPrm": &st.Permitted, "CapEff": &st.Effective,
		"CapBnd": &st.Bounding, "CapAmb": &st.Ambient,
	}
	seen := map[string]bool{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		dst, want := fields[k]
		if !ok || !want {
			continue
		}
		if seen[k] {
			return State{}, fmt.Errorf("%s appears twice", k)
		}
		seen[k] = true
		n, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
		if err != nil {
			return State{}, fmt.Errorf("%s: %w", k, err)
		}
		*dst = Set(n)
	}
	if len(seen) != len(fields) {
		return State{}, fmt.Errorf("found %d of the %d Cap* lines", len(seen), len(fields))
	}
	return st, nil
}

// Result says what Drop did.
type Result struct {
	Before, After State
	// BoundingKept is set when the bounding set could not be reduced
	// because the process lacks CAP_SETPCAP (as under systemd with
	// AmbientCapabilities). The bounding set only limits what an execve can
	// gain; the one program the exporter executes, its HTTP server, drops
	// every capability at start, and NoNewPrivileges or the unit's
	// CapabilityBoundingSet already bound it.
	BoundingKept bool
}

// Drop reduces every thread of the process to the capabilities in keep
// (those it already holds): effective and permitted become keep, inheritable
// and ambient become empty, and the bounding set becomes keep when the
// process holds CAP_SETPCAP.
func Drop(keep Set) (Result, error) {
	before, err := Current()
	if err != nil {
		return Result{}, err
	}
	res := Result{Before: before}
	last, err := lastCap()
	if err != nil {
		return res, err
	}

	// The bounding set first: dropping from it needs CAP_SETPCAP in the
	// effective set, which the capset below removes.
	if before.Effective.Has(unix.CAP_SETPCAP) {
		for c := 0; c <= last; c++ {
			if keep.Has(c) || !before.Bounding.Has(c) {
				continue
			}
			if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0, 0); errno != 0 {
				return res, allThreadsErr("prctl(PR_CAPBSET_DROP, "+Name(c)+")", errno)
			}
		}
	} else {
		res.BoundingKept = before.Bounding&^keep != 0
	}

	if before.Ambient != 0 {
		if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0, 0); errno != 0 {
			return res, allThreadsErr("prctl(PR_CAP_AMBIENT_CLEAR_ALL)", errno)
		}
	}

	kept := keep & before.Permitted
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	data := [2]unix.CapUserData{
		{Effective: uint32(kept), Permitted: uint32(kept)},
		{Effective: uint32(kept >> 32), Permitted: uint32(kept >> 32)},
	}
	if _, _, errno := psx.Syscall3(unix.SYS_CAPSET, uintptr(unsafe.Pointer(&hdr)), uintptr(unsafe.Pointer(&data[0])), 0); errno != 0 {
		return res, allThreadsErr("capset", errno)
	}

	res.After, err = Current()
	return res, err
}

func allThreadsErr(what string, errno syscall.Errno) error {
	return fmt.Errorf("%s on all threads: %w", what, errno)
}

// lastCap is the highest capability number the running kernel knows.
func lastCap() (int, error) {
	b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap")
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("/proc/sys/kernel/cap_last_cap: %w", err)
	}
	return n, nil
}
