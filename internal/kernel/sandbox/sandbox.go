// Package sandbox confines the exporter's HTTP server process: it holds no
// capability and may make only the system calls that serving needs.
//
// The server process parses what the network sends (HTTP, TLS, basic auth)
// and writes the exposition; everything that needs a capability or a
// kernel interface beyond its sockets lives in the monitor process that
// started it. A bug in the server's code should then give an attacker no
// more than a process that can answer on the sockets it already has: it
// cannot open a new socket (no connection out, no netlink, no raw socket),
// call bpf(2) or perf_event_open(2), issue an ioctl, execute a program,
// trace another process or make a namespace. The filter is an allowlist,
// as OpenSSH's privilege-separated child and systemd's SystemCallFilter=
// use: a call not on the list fails with EPERM rather than killing the
// process, so a call that a future Go runtime adds fails one operation, in
// the log, instead of taking the exporter down.
package sandbox

import (
	"fmt"
	"runtime"

	seccomp "github.com/elastic/go-seccomp-bpf"
	"github.com/elastic/go-seccomp-bpf/arch"
	"golang.org/x/sys/unix"
	"kernel.org/pub/linux/libs/security/libcap/psx"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
)

// allowed are the system calls of a Go HTTP server that already holds its
// listeners: the runtime's (memory, threads, signals, timers, the network
// poller, and GOMAXPROCS, which Go re-reads from the CPU affinity and the
// cgroup's CPU limit while it runs), accepting and serving connections,
// reading the web config file and its certificates (exporter-toolkit reads
// them on every TLS handshake), and writing the log. Names an architecture
// lacks (arm64 has no open, epoll_wait or newfstatat's older forms) are
// left out there: the runtime does not call them on it.
var allowed = []string{
	// memory
	"brk", "mmap", "munmap", "mprotect", "madvise", "mremap",
	// threads, scheduling, time
	"clone", "clone3", "exit", "exit_group", "futex", "gettid", "getpid", "sched_yield",
	"sched_getaffinity", "nanosleep", "clock_nanosleep", "clock_gettime", "gettimeofday",
	"set_robust_list", "rseq", "restart_syscall", "getrandom", "prlimit64", "getrlimit",
	// signals (goroutine preemption, SIGTERM)
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "sigaltstack", "tgkill",
	// the network poller
	"epoll_create1", "epoll_ctl", "epoll_pwait", "epoll_pwait2", "epoll_wait", "eventfd2", "pipe2",
	// files: the web config, certificates, cgroup and proc files the runtime reads
	"openat", "read", "pread64", "readv", "write", "pwrite64", "writev", "close", "lseek",
	"fstat", "newfstatat", "statx", "fcntl", "readlinkat",
	// serving on the listeners and the monitor's socket it was given
	"accept4", "getsockname", "getpeername", "getsockopt", "setsockopt", "shutdown",
	"recvfrom", "sendto", "recvmsg", "sendmsg",
}

// Policy is the filter for the running architecture.
func Policy() (seccomp.Policy, error) {
	info, err := arch.GetInfo("")
	if err != nil {
		return seccomp.Policy{}, err
	}
	var names []string
	for _, n := range allowed {
		if _, ok := info.SyscallNames[n]; ok {
			names = append(names, n)
		}
	}
	return seccomp.Policy{
		DefaultAction: seccomp.ActionErrno,
		Syscalls:      []seccomp.SyscallGroup{{Action: seccomp.ActionAllow, Names: names}},
	}, nil
}

// Confine drops every capability from every thread, sets no_new_privs on
// every thread, and installs the filter on every thread (TSYNC). It is
// called once the server holds its listeners and the monitor's socket, and
// before it reads anything from the network.
func Confine() error {
	if _, err := caps.Drop(0); err != nil {
		return fmt.Errorf("dropping every capability: %w", err)
	}
	if _, _, errno := psx.Syscall6(unix.SYS_PRCTL, unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0, 0); errno != 0 {
		return fmt.Errorf("prctl(PR_SET_NO_NEW_PRIVS) on all threads: %w", errno)
	}
	policy, err := Policy()
	if err != nil {
		return err
	}
	// LoadFilter sets no_new_privs and loads the filter in two system
	// calls, which must come from one thread; TSYNC then gives the filter
	// to every other thread.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	return seccomp.LoadFilter(seccomp.Filter{NoNewPrivs: true, Flag: seccomp.FilterFlagTSync, Policy: policy})
}
