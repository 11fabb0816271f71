// Package bpfperm finds why the kernel refused a bpf(2) command with EPERM
// or EACCES. The kernel says only "not permitted"; the cause can be a
// missing capability, RLIMIT_MEMLOCK (kernels before 5.11 charge BPF maps
// and programs to it), kernel lockdown, or unprivileged BPF being
// disabled, so Causes names each that holds on this host instead of
// guessing.
package bpfperm

import (
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/caps"
)

// Needs is what the kernel checks for a bpf(2) command.
type Needs int

const (
	// BPF: CAP_BPF and CAP_PERFMON, or CAP_SYS_ADMIN (loading and
	// attaching tracing and XDP programs, creating their maps).
	BPF Needs = iota
	// Admin: CAP_SYS_ADMIN, which CAP_BPF does not replace (walking
	// every program or link by id, BPF_ENABLE_STATS).
	Admin
	// NetAdmin: CAP_NET_ADMIN (BPF_PROG_QUERY of a device's tcx and
	// netkit hooks; since Linux 6.9 CAP_SYS_ADMIN does too).
	NetAdmin
)

// Causes lists what denies a command that needs needs on this host; never
// empty.
func Causes(needs Needs) []string {
	var causes []string
	st, capErr := caps.Current()
	var haveBPF bool
	if capErr == nil {
		admin := st.Effective.Has(unix.CAP_SYS_ADMIN)
		haveBPF = admin || st.Effective.Has(unix.CAP_BPF)
		havePerfmon := admin || st.Effective.Has(unix.CAP_PERFMON)
		var missing []string
		if !haveBPF {
			missing = append(missing, "CAP_BPF")
		}
		if !havePerfmon {
			missing = append(missing, "CAP_PERFMON")
		}
		switch {
		case needs == Admin && !admin:
			causes = append(causes, "missing CAP_SYS_ADMIN (CAP_BPF is not enough for this command)")
		case needs == NetAdmin && !st.Effective.Has(unix.CAP_NET_ADMIN):
			causes = append(causes, "missing CAP_NET_ADMIN (BPF_PROG_QUERY of a device's hooks)")
		case needs == BPF && len(missing) > 0:
			causes = append(causes, "missing "+strings.Join(missing, " and ")+" (or CAP_SYS_ADMIN)")
		}
	}
	if limit, charged := memlockCharged(); charged {
		causes = append(causes, fmt.Sprintf("RLIMIT_MEMLOCK is %s and this kernel (before 5.11) charges BPF memory to it: "+
			"run with CAP_SYS_RESOURCE so the exporter lifts it, or raise it (systemd LimitMEMLOCK=infinity, ulimit -l unlimited)", limit))
	}
	if mode := lockdownMode(); mode == "confidentiality" {
		causes = append(causes, "kernel lockdown is in confidentiality mode, which forbids BPF programs that read kernel memory")
	}
	if !haveBPF {
		if b, err := os.ReadFile("/proc/sys/kernel/unprivileged_bpf_disabled"); err == nil && strings.TrimSpace(string(b)) != "0" {
			causes = append(causes, "kernel.unprivileged_bpf_disabled is set, so BPF needs CAP_BPF or CAP_SYS_ADMIN")
		}
	}
	if len(causes) == 0 {
		causes = append(causes, "no capability, memlock, lockdown or sysctl cause found (a security module such as SELinux or AppArmor may deny BPF)")
	}
	return causes
}

// memlockCharged reports RLIMIT_MEMLOCK when it is finite on a kernel that
// charges BPF objects to it: before Linux 5.11, whose patch set "bpf:
// switch to memcg-based memory accounting" (Roman Gushchin) replaced it.
func memlockCharged() (string, bool) {
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_MEMLOCK, &lim); err != nil || lim.Cur == unix.RLIM_INFINITY {
		return "", false
	}
	major, minor, ok := kernelRelease()
	if !ok || major > 5 || (major == 5 && minor >= 11) {
		return "", false
	}
	return fmt.Sprintf("%d KiB", lim.Cur/1024), true
}

// kernelRelease is the running kernel's major and minor version.
func kernelRelease() (major, minor int, ok bool) {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return 0, 0, false
	}
	n, err := fmt.Sscanf(unix.ByteSliceToString(u.Release[:]), "%d.%d", &major, &minor)
	return major, minor, err == nil && n == 2
}

// lockdownMode is the active mode in /sys/kernel/security/lockdown
// ("none", "integrity", "confidentiality"), or "" where there is none.
func lockdownMode() string {
	b, err := os.ReadFile("/sys/kernel/security/lockdown")
	if err != nil {
		return ""
	}
	return parseLockdown(b)
}

// parseLockdown reads the mode in brackets of a lockdown file.
func parseLockdown(b []byte) string {
	for _, f := range strings.Fields(string(b)) {
		if strings.HasPrefix(f, "[") && strings.HasSuffix(f, "]") {
			return strings.Trim(f, "[]")
		}
	}
	return ""
}
