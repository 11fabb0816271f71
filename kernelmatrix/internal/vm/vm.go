// Package vm boots Debian's kernels in QEMU over this machine's own root
// file system, for the kernel matrix: the binaries and test binaries built
// here run unchanged in the guest, on the guest's kernel.
//
// The guest's root is the host's / shared read-only over virtio 9p, under
// a tmpfs overlay; the initramfs holds only guestinit (PID 1) and the
// modules needed to mount that root. A guest of another architecture
// (arm64) runs on a Debian root of its own architecture instead, with the
// host directories it needs (the repository, the test binaries) bound at
// their own paths. KVM is used where /dev/kvm opens and
// the guest reaches its init within a minute, TCG (QEMU's emulator)
// otherwise: nested KVM hangs on the machines this project is developed
// on, and TCG boots Debian's 6.1 to its first command in about 3 s.
package vm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Kernel is one of Debian's kernels unpacked by scripts/fetch-kernel.
type Kernel struct {
	Suite   string // bullseye, bookworm, trixie
	Arch    string // amd64, arm64
	Version string // uname -r
	Dir     string // holds vmlinuz and lib/modules/Version, and root for a foreign Arch
}

// Suite is one guest of the matrix: a Debian release's kernel on an
// architecture.
type Suite struct{ Name, Series, Arch string }

// ID names the suite in XDP_EXPORTER_KERNELS and in logs: the release, with
// the architecture where it is not amd64 (trixie-arm64).
func (s Suite) ID() string {
	if s.Arch == "amd64" {
		return s.Name
	}
	return s.Name + "-" + s.Arch
}

// Key is the suite's key in the support recording and its column in
// docs/kernels.md: the kernel series, with the architecture where it is
// not amd64 (6.12 arm64).
func (s Suite) Key() string {
	if s.Arch == "amd64" {
		return s.Series
	}
	return s.Series + " " + s.Arch
}

// Suites are the guests of the kernel matrix, oldest kernel first, amd64
// before arm64. Debian's 6.12 runs on arm64 too, under QEMU's emulator of
// that architecture: its JIT, its BPF trampolines (fexit since 6.0) and
// its build of the kernel are the arm64 users' (Graviton, Ampere, Grace,
// BlueField).
var Suites = []Suite{
	{"bullseye", "5.10", "amd64"},
	{"bookworm", "6.1", "amd64"},
	{"trixie", "6.12", "amd64"},
	{"trixie", "6.12", "arm64"},
}

// Fetch runs scripts/fetch-kernel for suite and arch: a cached kernel is
// reused, a new one downloaded from Debian's archive.
func Fetch(ctx context.Context, suite, arch string) (Kernel, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(repoRoot(), "scripts", "fetch-kernel"), suite, arch)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return Kernel{}, fmt.Errorf("fetching Debian's %s kernel for %s: %v\n%s", suite, arch, err, stderr.Bytes())
	}
	dir := strings.TrimSpace(string(out))
	v, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return Kernel{}, err
	}
	return Kernel{Suite: suite, Arch: arch, Version: strings.TrimSpace(string(v)), Dir: dir}, nil
}

// foreign is a kernel of another architecture than this machine's: its
// guest runs on the root scripts/fetch-kernel made for it, not the host's.
func (k Kernel) foreign() bool { return k.Arch != "amd64" }

// ModulesDir is the kernel's /lib/modules/VERSION tree on the host.
func (k Kernel) ModulesDir() string { return filepath.Join(k.Dir, "lib", "modules", k.Version) }

// Config is one guest: two CPUs, 2 GiB, the host's root, and two NICs on
// a QEMU hub of their own.
type Config struct {
	Kernel Kernel
	// Script runs in the guest with /bin/sh -e, as root, in the host's
	// file system; XDPVM_OUT names the directory Out is shared as.
	Script string
	// Out is a host directory the guest writes to (at $XDPVM_OUT).
	Out string
	// Console receives everything the guest prints.
	Console io.Writer
	// NUMA splits the guest into two NUMA nodes, a CPU and 1 GiB each.
	NUMA bool
	// Devices are more QEMU -device and -netdev arguments: a test's PCIe
	// topology. Buses named there may sit on node 1 (pxb-pcie numa_node).
	Devices []string
	// HostPaths are host directories a foreign kernel's guest sees at the
	// same paths (the test binaries); the repository, the script's and
	// the modules' directories always are. The host's own root is
	// the root of other guests.
	HostPaths []string
}

// ExitError is a guest whose script exited non-zero or that never said.
type ExitError struct {
	Kernel Kernel
	Status int // -1: the guest stopped without an exit status
}

func (e *ExitError) Error() string {
	if e.Status < 0 {
		return fmt.Sprintf("%s guest (%s) stopped without reporting an exit status", e.Kernel.Suite, e.Kernel.Version)
	}
	return fmt.Sprintf("%s guest (%s): script exited with status %d", e.Kernel.Suite, e.Kernel.Version, e.Status)
}

// Markers guestinit prints on the console: upMarker when it starts, and
// exitMarker before the script's exit status.
const (
	upMarker   = "XDPVM-UP"
	exitMarker = "XDPVM-EXIT:"
)

// kvmBootTimeout is how long a KVM guest may take to reach guestinit.
// Nested KVM hangs for good after the kernel's decompressor on the
// machines this project is developed on; TCG then takes over.
const kvmBootTimeout = 60 * time.Second

// errNoBoot is a KVM guest that never reached guestinit.
var errNoBoot = errors.New("the guest did not reach its init")

// errPanic is a guest whose kernel panicked.
var errPanic = errors.New("the guest's kernel panicked")

// panicMarker is what the kernel prints when it panics (panic()).
const panicMarker = "Kernel panic - not syncing"

// Run boots the guest, runs the script and returns nil when it exited 0.
// A guest whose kernel panics is booted once more, with Out emptied.
func Run(ctx context.Context, cfg Config) error {
	work, err := os.MkdirTemp("", "xdpvm-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	initrd := filepath.Join(work, "initrd.cpio")
	if err := buildInitramfs(ctx, cfg.Kernel, work, initrd); err != nil {
		return err
	}
	script := filepath.Join(work, "run.sh")
	if err := os.WriteFile(script, []byte(cfg.Script), 0o644); err != nil {
		return err
	}
	args := qemuArgs(cfg, initrd, script)
	err = start(ctx, cfg, args)
	if !errors.Is(err, errPanic) || ctx.Err() != nil {
		return err
	}
	// The emulator itself faults now and then: Debian's 6.12 took a
	// double fault in the slab allocator under QEMU 7.2's TCG, with a
	// garbage EFLAGS and no BPF on the stack, in one matrix run of about
	// six. The guest gets one more boot; a kernel that panics twice fails.
	if cfg.Console != nil {
		fmt.Fprintf(cfg.Console, "vm: the %s guest's kernel panicked; booting it once more\n", cfg.Kernel.Suite)
	}
	if cfg.Out != "" {
		if err := emptyDir(cfg.Out); err != nil {
			return err
		}
	}
	return start(ctx, cfg, args)
}

// qemuArgs are QEMU's arguments for cfg's guest, booting the kernel with
// initrd to run script: two CPUs, 2 GiB, the root shared over 9p, two
// NICs on a hub of their own, then the test's devices.
func qemuArgs(cfg Config, initrd, script string) []string {
	k := cfg.Kernel
	machine, console := []string{"-machine", "q35"}, "ttyS0"
	if k.Arch == "arm64" {
		machine, console = []string{"-machine", "virt"}, "ttyAMA0"
	}
	root := "/"
	if k.foreign() {
		root = filepath.Join(k.Dir, "root")
	}
	args := append(machine,
		"-nodefaults", "-no-user-config", "-no-reboot", "-display", "none",
		"-smp", "2", "-m", "2048",
		"-kernel", filepath.Join(k.Dir, "vmlinuz"), "-initrd", initrd,
		"-serial", "stdio",
		"-fsdev", "local,id=root,path="+root+",security_model=none,readonly=on,multidevs=remap",
		"-device", "virtio-9p-pci,fsdev=root,mount_tag=root,bus=pcie.0",
		// eth0 and eth1: virtio_net NICs on a hub of their own, which
		// reaches nothing else; the netdev collector's qstats test reads
		// eth0, which receives what eth1 sends.
		"-netdev", "hubport,id=nic0,hubid=0",
		"-device", "virtio-net-pci,netdev=nic0,bus=pcie.0",
		"-netdev", "hubport,id=nic1,hubid=0",
		"-device", "virtio-net-pci,netdev=nic1,bus=pcie.0",
	)
	if cfg.NUMA {
		args = append(args,
			"-object", "memory-backend-ram,id=mem0,size=1G", "-object", "memory-backend-ram,id=mem1,size=1G",
			"-numa", "node,nodeid=0,cpus=0,memdev=mem0", "-numa", "node,nodeid=1,cpus=1,memdev=mem1")
	}
	cmdline := []string{"console=" + console, "panic=-1", "loglevel=4",
		"xdpvm.modules=" + k.ModulesDir(), "xdpvm.run=" + script}
	if cfg.Out != "" {
		args = append(args,
			"-fsdev", "local,id=out,path="+cfg.Out+",security_model=none",
			"-device", "virtio-9p-pci,fsdev=out,mount_tag=out,bus=pcie.0")
		cmdline = append(cmdline, "xdpvm.out=1")
	}
	if k.foreign() {
		// The host's root, read-only, from which guestinit binds the
		// directories the guest needs at their own paths.
		paths := append([]string{repoRoot(), filepath.Dir(script), k.ModulesDir()}, cfg.HostPaths...)
		args = append(args,
			"-fsdev", "local,id=host,path=/,security_model=none,readonly=on,multidevs=remap",
			"-device", "virtio-9p-pci,fsdev=host,mount_tag=host,bus=pcie.0")
		cmdline = append(cmdline, "xdpvm.host="+strings.Join(paths, ":"))
	}
	// A test's devices come last and the harness's sit on pcie.0 by
	// name: QEMU would put a device without a bus on the first bus with
	// room, which may be a test's expander bus.
	args = append(args, cfg.Devices...)
	return append(args, "-append", strings.Join(cmdline, " "))
}

// start boots the guest with KVM where /dev/kvm opens and with TCG when
// KVM does not bring it up.
func start(ctx context.Context, cfg Config, args []string) error {
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil && !cfg.Kernel.foreign() {
		f.Close()
		err := boot(ctx, cfg, append(args, "-accel", "kvm", "-cpu", "host"), kvmBootTimeout)
		if !errors.Is(err, errNoBoot) {
			return err
		}
		if cfg.Console != nil {
			fmt.Fprintf(cfg.Console, "vm: KVM did not bring the %s guest up (%v); booting it with TCG\n", cfg.Kernel.Suite, err)
		}
	}
	// One host thread runs every vCPU: with a thread per vCPU (QEMU's
	// default), a guest kernel patching its own code while another vCPU
	// runs it (text_poke_bp, as when a tracepoint is enabled) now and then
	// hits a stale int3 and oopses (seen on Debian's 6.12 in __napi_poll).
	return boot(ctx, cfg, append(args, "-accel", "tcg,thread=single", "-cpu", "max"), 0)
}

// emptyDir removes what dir holds, so that a second boot's guest does not
// find the first one's output.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// boot runs QEMU with args until the guest powers off. With upWithin set,
// a guest that has not printed upMarker by then is stopped and errNoBoot
// returned, as is one whose QEMU ends before it.
func boot(ctx context.Context, cfg Config, args []string, upWithin time.Duration) error {
	qctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cmd := exec.CommandContext(qctx, qemuSystem[cfg.Kernel.Arch], args...)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	status := -1
	var up, panicked atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 64<<10), 1<<20)
		for sc.Scan() {
			line := strings.TrimRight(sc.Text(), "\r")
			if cfg.Console != nil {
				fmt.Fprintln(cfg.Console, line)
			}
			if line == upMarker {
				up.Store(true)
			}
			if strings.Contains(line, panicMarker) {
				panicked.Store(true)
			}
			if s, ok := strings.CutPrefix(line, exitMarker); ok {
				if n, err := strconv.Atoi(strings.TrimSpace(s)); err == nil {
					status = n
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	if upWithin > 0 {
		timer := time.AfterFunc(upWithin, func() {
			if !up.Load() {
				cancel()
			}
		})
		defer timer.Stop()
	}
	runErr := cmd.Run()
	pw.Close()
	wg.Wait()
	if upWithin > 0 && !up.Load() && ctx.Err() == nil {
		return fmt.Errorf("%w: qemu: %v", errNoBoot, runErr)
	}
	if ctx.Err() != nil {
		return fmt.Errorf("%s guest (%s): %w", cfg.Kernel.Suite, cfg.Kernel.Version, ctx.Err())
	}
	if status != 0 {
		if panicked.Load() {
			return fmt.Errorf("%w: %w", errPanic, &ExitError{Kernel: cfg.Kernel, Status: status})
		}
		if status < 0 && runErr != nil {
			return fmt.Errorf("%w: qemu: %v", &ExitError{Kernel: cfg.Kernel, Status: status}, runErr)
		}
		return &ExitError{Kernel: cfg.Kernel, Status: status}
	}
	return nil
}

// qemuSystem is the QEMU system emulator of each architecture.
var qemuSystem = map[string]string{"amd64": "qemu-system-x86_64", "arm64": "qemu-system-aarch64"}

// initModules are what guestinit needs to mount the host root: the virtio
// transport, 9p and overlayfs; and the driver of eth0, which no udev loads
// in the guest. Debian builds some of them into the kernel
// (modules.builtin), which is fine.
var initModules = []string{"virtio_pci", "9pnet_virtio", "9p", "overlay", "virtio_net"}

// buildInitramfs writes a newc cpio archive holding guestinit as /init and
// initModules with their dependencies (decompressed: not every kernel of
// the matrix decompresses modules itself), listed in load order.
func buildInitramfs(ctx context.Context, k Kernel, work, out string) error {
	root := filepath.Join(work, "initramfs")
	if err := os.MkdirAll(filepath.Join(root, "mod"), 0o755); err != nil {
		return err
	}
	build := exec.CommandContext(ctx, "go", "build", "-o", filepath.Join(root, "init"), "./kernelmatrix/internal/vm/guestinit")
	build.Dir = repoRoot()
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOARCH="+k.Arch)
	if b, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("building guestinit: %v\n%s", err, b)
	}
	order, err := moduleOrder(k.ModulesDir(), initModules)
	if err != nil {
		return err
	}
	var list strings.Builder
	for i, rel := range order {
		dst := filepath.Join(root, "mod", fmt.Sprintf("%02d.ko", i))
		if err := decompress(ctx, filepath.Join(k.ModulesDir(), rel), dst); err != nil {
			return err
		}
		fmt.Fprintf(&list, "/mod/%02d.ko\n", i)
	}
	if err := os.WriteFile(filepath.Join(root, "modules"), []byte(list.String()), 0o644); err != nil {
		return err
	}
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	// cpio(1) from Debian's cpio package: newc is the format the kernel
	// unpacks, and owner 0 makes /init root's.
	cpio := exec.CommandContext(ctx, "sh", "-c", "find . -print | cpio --quiet -o -H newc -R 0:0")
	cpio.Dir = root
	cpio.Stdout = f
	var stderr bytes.Buffer
	cpio.Stderr = &stderr
	if err := cpio.Run(); err != nil {
		return fmt.Errorf("cpio: %v: %s", err, stderr.Bytes())
	}
	return f.Close()
}

// decompress copies a module, decompressing .ko.xz and .ko.zst.
func decompress(ctx context.Context, src, dst string) error {
	var cmd *exec.Cmd
	switch filepath.Ext(src) {
	case ".xz":
		cmd = exec.CommandContext(ctx, "xz", "-dc", src)
	case ".zst":
		cmd = exec.CommandContext(ctx, "zstd", "-dc", src)
	default:
		cmd = exec.CommandContext(ctx, "cat", src)
	}
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = f, &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s: %v: %s", cmd, err, stderr.Bytes())
	}
	return f.Close()
}

// moduleOrder resolves names against modules.dep and modules.builtin:
// the module files to load, dependencies first, each once; builtin names
// are left out.
func moduleOrder(dir string, names []string) ([]string, error) {
	deps := map[string][]string{} // file -> its dependencies' files
	byName := map[string]string{} // module name -> file
	f, err := os.Open(filepath.Join(dir, "modules.dep"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		file, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[file] = strings.Fields(rest)
		byName[moduleName(file)] = file
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	builtin, err := os.ReadFile(filepath.Join(dir, "modules.builtin"))
	if err != nil {
		return nil, err
	}
	isBuiltin := map[string]bool{}
	for _, l := range strings.Fields(string(builtin)) {
		isBuiltin[moduleName(l)] = true
	}
	var order []string
	seen := map[string]bool{}
	var visit func(file string)
	visit = func(file string) {
		if seen[file] {
			return
		}
		seen[file] = true
		for _, d := range deps[file] {
			visit(d)
		}
		order = append(order, file)
	}
	for _, n := range names {
		if isBuiltin[n] {
			continue
		}
		file, ok := byName[n]
		if !ok {
			return nil, fmt.Errorf("%s: no module %s, and it is not built in", dir, n)
		}
		visit(file)
	}
	return order, nil
}

// moduleName is kmod's name of a module file: the base name without .ko
// and compression suffixes, with '-' as '_'.
func moduleName(file string) string {
	base := filepath.Base(file)
	if i := strings.Index(base, ".ko"); i >= 0 {
		base = base[:i]
	}
	return strings.ReplaceAll(base, "-", "_")
}

// repoRoot is the module's root directory, where scripts/ and go.mod are.
func repoRoot() string {
	_, here, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(here), "..", "..", "..")
}

// Available checks for the host tools the matrix needs.
func Available() error {
	var missing []string
	for _, tool := range []string{"qemu-system-x86_64", "qemu-system-aarch64", "mmdebstrap", "cpio", "xz", "apt-get", "dpkg-deb", "depmod"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s: make deps installs them", strings.Join(missing, ", "))
	}
	return nil
}
