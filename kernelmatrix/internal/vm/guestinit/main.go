// Command guestinit is PID 1 of the kernel matrix's guests (package vm).
// It runs from the initramfs: loads the modules the initramfs carries (the
// 9p and overlay stack, which Debian builds as modules), mounts the host's
// root file system read-only over 9p under a tmpfs overlay, makes that the
// real root (switch_root, so the kernel's module autoloading runs the
// host's modprobe against the guest kernel's modules), runs the command
// the host put on the kernel command line, prints its exit status on the
// console and powers the guest off.
//
// Kernel command line parameters (a dot keeps the kernel from passing
// them to init as arguments or environment; they are read from
// /proc/cmdline):
//
//	xdpvm.modules=DIR  the guest kernel's modules on the host, linked (or
//	                   bind-mounted) at /lib/modules/$(uname -r)
//	xdpvm.out=DIR      a host directory shared read-write as tag "out"
//	xdpvm.run=FILE     the script to run with /bin/sh
//	xdpvm.host=P1:P2   the root is not the host's (a guest of another
//	                   architecture): the host's root is shared as tag
//	                   "host", and these of its directories are bound at
//	                   the same paths in the guest
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// The host harness (package vm) reads these console lines: upMarker, that
// the guest reached its init; exitMarker, before the command's exit status.
const (
	upMarker   = "XDPVM-UP"
	exitMarker = "XDPVM-EXIT:"
)

// path is the script's PATH, and guestinit's own for the tools it runs.
const path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/go/bin"

func main() {
	os.Setenv("PATH", path)
	fmt.Printf("\n%s\n", upMarker)
	status := run()
	fmt.Printf("\n%s %d\n", exitMarker, status)
	unix.Sync()
	if err := unix.Reboot(unix.LINUX_REBOOT_CMD_POWER_OFF); err != nil {
		fmt.Println("guestinit: power off:", err)
	}
	select {}
}

func run() int {
	if err := setup(); err != nil {
		fmt.Println("guestinit:", err)
		return 125
	}
	params, err := cmdline()
	if err != nil {
		fmt.Println("guestinit:", err)
		return 125
	}
	script := params["xdpvm.run"]
	if script == "" {
		fmt.Println("guestinit: no xdpvm.run= on the kernel command line")
		return 125
	}
	cmd := exec.Command("/bin/sh", "-e", script)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stdout
	cmd.Dir = "/root"
	cmd.Env = []string{
		"PATH=" + path,
		"HOME=/root",
		"TMPDIR=/tmp",
		"XDPVM_OUT=/out",
	}
	if err := cmd.Run(); err != nil {
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return exit.ExitCode()
		}
		fmt.Println("guestinit:", err)
		return 126
	}
	return 0
}

// setup builds the guest's root from the initramfs up to the switched
// root with the kernel file systems the tests use mounted.
func setup() error {
	for _, m := range []struct{ src, dst, fs string }{
		{"dev", "/dev", "devtmpfs"},
		{"proc", "/proc", "proc"},
		{"sys", "/sys", "sysfs"},
	} {
		if err := mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			return err
		}
	}
	if err := loadModules("/modules"); err != nil {
		return err
	}
	params, err := cmdline()
	if err != nil {
		return err
	}
	if err := rootOverlay(); err != nil {
		return err
	}
	if out := params["xdpvm.out"]; out != "" {
		if err := mount9p("out", "/newroot/out", 0); err != nil {
			return err
		}
	}
	if paths := params["xdpvm.host"]; paths != "" {
		if err := bindHost(strings.Split(paths, ":")); err != nil {
			return err
		}
	}
	if err := switchRoot("/newroot"); err != nil {
		return err
	}
	for _, m := range []struct{ src, dst, fs string }{
		{"proc", "/proc", "proc"},
		{"sys", "/sys", "sysfs"},
		{"dev", "/dev", "devtmpfs"},
		{"devpts", "/dev/pts", "devpts"},
		{"tmpfs", "/run", "tmpfs"},
		{"bpf", "/sys/fs/bpf", "bpf"},
		{"cgroup2", "/sys/fs/cgroup", "cgroup2"},
		{"debugfs", "/sys/kernel/debug", "debugfs"},
		{"tracefs", "/sys/kernel/tracing", "tracefs"},
	} {
		if err := mount(m.src, m.dst, m.fs, 0, ""); err != nil {
			return err
		}
	}
	// The script's home and working directory; a root of another
	// architecture, unpacked from packages alone, has none.
	if err := os.MkdirAll("/root", 0o700); err != nil {
		return err
	}
	if mods := params["xdpvm.modules"]; mods != "" {
		var u unix.Utsname
		if err := unix.Uname(&u); err != nil {
			return err
		}
		if err := linkModules(mods, "/lib/modules/"+unix.ByteSliceToString(u.Release[:])); err != nil {
			return err
		}
	}
	// lo, and the NICs the host gave the guest: they share a QEMU hub
	// that reaches nothing else, so the IPv6 neighbour discovery each one
	// multicasts when it comes up is the traffic the others receive (with
	// allmulticast, as virtio-net filters multicast a host did not join).
	links, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return err
	}
	for _, l := range links {
		if out, err := exec.Command("ip", "link", "set", l.Name(), "allmulticast", "on", "up").CombinedOutput(); err != nil {
			return fmt.Errorf("ip link set %s up: %v: %s", l.Name(), err, out)
		}
	}
	return nil
}

// rootOverlay mounts the host root (9p tag "root") read-only and a tmpfs
// over it at /newroot: the guest writes, the host's files stay as they are.
func rootOverlay() error {
	for _, d := range []string{"/lower", "/rw", "/newroot"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	if err := mount9p("root", "/lower", unix.MS_RDONLY); err != nil {
		return err
	}
	if err := mount("tmpfs", "/rw", "tmpfs", 0, ""); err != nil {
		return err
	}
	for _, d := range []string{"/rw/upper", "/rw/work"} {
		if err := os.Mkdir(d, 0o755); err != nil {
			return err
		}
	}
	return mount("overlay", "/newroot", "overlay", 0, "lowerdir=/lower,upperdir=/rw/upper,workdir=/rw/work")
}

// bindHost mounts the host's root (9p tag "host") read-only at /host and
// binds each of paths from there to the same path in the new root.
func bindHost(paths []string) error {
	if err := mount9p("host", "/host", unix.MS_RDONLY); err != nil {
		return err
	}
	for _, p := range paths {
		dst := filepath.Join("/newroot", p)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(filepath.Join("/host", p), dst, "", unix.MS_BIND, ""); err != nil {
			return fmt.Errorf("binding the host's %s: %w", p, err)
		}
	}
	return nil
}

// mount9p mounts the virtio 9p share tag at dir, retrying while the
// virtio device is still being probed.
func mount9p(tag, dir string, flags uintptr) error {
	if err := os.MkdirAll(dir, 0o755); err != nil && !errors.Is(err, unix.EROFS) {
		return err
	}
	var err error
	for range 50 {
		err = mount(tag, dir, "9p", flags, "trans=virtio,version=9p2000.L,msize=262144,cache=loose")
		if err == nil || !errors.Is(err, unix.ENOENT) {
			return err
		}
		time.Sleep(100 * time.Millisecond)
	}
	return err
}

func mount(src, dst, fs string, flags uintptr, data string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	if err := unix.Mount(src, dst, fs, flags, data); err != nil {
		return fmt.Errorf("mount -t %s %s %s: %w", fs, src, dst, err)
	}
	return nil
}

// linkModules makes the guest kernel's modules appear at dst, the
// /lib/modules/VERSION of the shared root: a symbolic link, or, where the
// host has a directory of that name (it runs the same kernel the matrix
// fetched), a bind mount over it in the guest alone. Nothing reaches the
// host: its root is read-only under the guest's overlay.
func linkModules(mods, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	err := os.Symlink(mods, dst)
	if !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := unix.Mount(mods, dst, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s over the host's %s: %w", mods, dst, err)
	}
	return nil
}

// switchRoot makes dir the root, as util-linux's switch_root does, without
// deleting the initramfs (the guest is gone in minutes).
func switchRoot(dir string) error {
	for _, m := range []string{"/dev", "/proc", "/sys"} {
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			return fmt.Errorf("umount %s: %w", m, err)
		}
	}
	if err := unix.Chdir(dir); err != nil {
		return err
	}
	if err := unix.Mount(dir, "/", "", unix.MS_MOVE, ""); err != nil {
		return fmt.Errorf("mount --move %s /: %w", dir, err)
	}
	if err := unix.Chroot("."); err != nil {
		return err
	}
	return unix.Chdir("/")
}

// loadModules loads, in order, the modules listed in file (paths in the
// initramfs, dependencies first, as the host resolved them from
// modules.dep). A module that is already there is not an error.
func loadModules(file string) error {
	f, err := os.Open(file)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		path := strings.TrimSpace(sc.Text())
		if path == "" {
			continue
		}
		m, err := os.Open(path)
		if err != nil {
			return err
		}
		err = unix.FinitModule(int(m.Fd()), "", 0)
		m.Close()
		if err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("loading module %s: %w", filepath.Base(path), err)
		}
	}
	return sc.Err()
}

// cmdline returns the kernel command line's key=value parameters.
func cmdline() (map[string]string, error) {
	b, err := os.ReadFile("/proc/cmdline")
	if err != nil {
		return nil, err
	}
	params := map[string]string{}
	for _, f := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(f, "=")
		params[k] = v
	}
	return params, nil
}
