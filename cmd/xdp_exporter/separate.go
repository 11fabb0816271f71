package main

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/coreos/go-systemd/v22/activation"
	"github.com/mdlayher/vsock"
	"github.com/prometheus/exporter-toolkit/web"
	"golang.org/x/sys/unix"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/sandbox"
	"github.com/xdp-exporter/xdp_exporter/internal/privsep"
)

// With --runtime.privilege-separation the exporter runs as two processes.
// The monitor is the process the user starts: it builds the collectors,
// keeps the capabilities they need at scrape time and runs them, and talks
// to nothing but the server. The server is the same binary executed again
// by the monitor, told so by serverEnv: it holds no capability, runs under
// a seccomp filter (internal/kernel/sandbox), serves HTTP on listeners the
// monitor made, and asks the monitor for each scrape over a socket pair
// (internal/privsep). Its file descriptors: 3 the socket pair, then the
// listeners.

// serverEnv marks the server process; its value is the number of
// listeners it inherits after the channel.
const serverEnv = "XDP_EXPORTER_SERVER_LISTENERS"

const (
	channelFD       = 3
	firstListenerFD = 4
)

// The server is executed through /proc/self/exe, which still works after a
// package upgrade replaced the binary, but which names the process "exe"
// in ps and ss; it takes the exporter's name back. Package initialisation
// runs on the main thread, whose name is the process's.
func init() {
	if _, ok := serverRole(); ok {
		name := []byte(program + "\x00")
		_ = unix.Prctl(unix.PR_SET_NAME, uintptr(unsafe.Pointer(&name[0])), 0, 0, 0)
	}
}

// serverRole reports whether this process is the server, and how many
// listeners it holds.
func serverRole() (int, bool) {
	v, ok := os.LookupEnv(serverEnv)
	if !ok {
		return 0, false
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, false
	}
	return n, true
}

// listen makes the listeners: systemd's sockets with --web.systemd-socket,
// else one per --web.listen-address, TCP or vsock://, as exporter-toolkit's
// ListenAndServe does; the toolkit has no function that only listens, so
// this repeats its few lines.
func listen(flags *web.FlagConfig, logger *slog.Logger) ([]*os.File, error) {
	if flags.WebSystemdSocket != nil && *flags.WebSystemdSocket {
		logger.Info("Listening on systemd activated listeners instead of port listeners.")
		files := activation.Files(true)
		if len(files) == 0 {
			return nil, errors.New("no socket activation file descriptors found")
		}
		return files, nil
	}
	var files []*os.File
	for _, address := range *flags.WebListenAddresses {
		f, err := listenOn(address)
		if err != nil {
			for _, f := range files {
				f.Close()
			}
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}

func listenOn(address string) (*os.File, error) {
	if rest, ok := strings.CutPrefix(address, "vsock://"); ok {
		_, p, err := net.SplitHostPort(rest)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", address, err)
		}
		port, err := strconv.ParseUint(p, 10, 32)
		if err != nil {
			return nil, fmt.Errorf("%s: port: %w", address, err)
		}
		fd, err := unix.Socket(unix.AF_VSOCK, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", address, err)
		}
		if err := unix.Bind(fd, &unix.SockaddrVM{CID: unix.VMADDR_CID_ANY, Port: uint32(port)}); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: bind: %w", address, err)
		}
		if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: listen: %w", address, err)
		}
		return os.NewFile(uintptr(fd), address), nil
	}
	l, err := net.Listen("tcp", address)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.(*net.TCPListener).File()
}

// fileListeners turns listening sockets back into net.Listeners, closing
// the files.
func fileListeners(files []*os.File) ([]net.Listener, error) {
	var ls []net.Listener
	var errs []error
	for _, f := range files {
		var l net.Listener
		var err error
		if domain, _ := unix.GetsockoptInt(int(f.Fd()), unix.SOL_SOCKET, unix.SO_DOMAIN); domain == unix.AF_VSOCK {
			l, err = vsock.FileListener(f)
		} else {
			l, err = net.FileListener(f)
		}
		f.Close()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		ls = append(ls, l)
	}
	return ls, errors.Join(errs...)
}

// serverProcess is the running server, seen from the monitor.
type serverProcess struct {
	cmd     *exec.Cmd
	channel *os.File
}

// startServer executes this binary again, with the same arguments, as the
// server, handing it the listeners, which it closes here: from then on the
// monitor holds no socket the network reaches.
func startServer(args []string, listeners []*os.File) (*serverProcess, error) {
	defer func() {
		for _, f := range listeners {
			f.Close()
		}
	}()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("socketpair: %w", err)
	}
	mine, theirs := os.NewFile(uintptr(fds[0]), "server channel"), os.NewFile(uintptr(fds[1]), "monitor channel")
	defer theirs.Close()
	cmd := exec.Command("/proc/self/exe", args...)
	cmd.Args[0] = os.Args[0]
	cmd.Env = append(os.Environ(), serverEnv+"="+strconv.Itoa(len(listeners)))
	cmd.ExtraFiles = append([]*os.File{theirs}, listeners...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// The server also stops when the channel ends; the signal covers a
	// monitor killed before it could close it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		mine.Close()
		return nil, err
	}
	return &serverProcess{cmd: cmd, channel: mine}, nil
}

// monitor answers the server's requests until SIGINT or SIGTERM, when it
// closes the channel and waits for the server to finish its responses, or
// until the server ends, which is a failure; it returns the exit code.
func (s *serverProcess) monitor(expose privsep.ExposeFunc, limit int, logger *slog.Logger) int {
	stop := signalled(logger)
	m := &privsep.Monitor{Expose: expose, Limit: limit, Logger: logger}
	served := make(chan error, 1)
	go func() { served <- m.Serve(s.channel) }()
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	logger.Info("serving HTTP from an unprivileged process", "pid", s.cmd.Process.Pid)

	select {
	case <-stop:
		s.channel.Close()
		select {
		case err := <-exited:
			if err != nil {
				logger.Error("the HTTP server process", "err", err)
			}
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			logger.Error("the HTTP server process did not stop within 10s; killed", "err", <-exited)
		}
		return 0
	case err := <-exited:
		logger.Error("the HTTP server process ended", "err", err)
	case err := <-served:
		// The channel ends first when the server dies: its exit status
		// says why.
		select {
		case werr := <-exited:
			err = werr
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			err = errors.Join(err, errors.New("it closed the channel and did not exit within 10s; killed"))
		}
		logger.Error("the HTTP server process ended", "err", err)
	}
	s.channel.Close()
	return 1
}

// runServer is the server process: it confines itself before it reads
// anything from the network, serves until the monitor closes the channel,
// and leaves SIGINT and SIGTERM to the monitor, which is the one to decide.
func runServer(listeners int, opts webOptions, logger *slog.Logger) int {
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM)
	files := make([]*os.File, listeners)
	for i := range files {
		files[i] = os.NewFile(uintptr(firstListenerFD+i), "listener")
	}
	ls, err := fileListeners(files)
	if err != nil {
		logger.Error("the listeners the monitor passed", "err", err)
		return 1
	}
	client := privsep.NewClient(os.NewFile(channelFD, "monitor channel"), logger)
	if err := sandbox.Confine(); err != nil {
		logger.Error("confining the HTTP server process", "err", err)
		return 1
	}
	code := serveOn(ls, opts, client.Expose, client.Done(), logger)
	if err := client.Err(); err != nil {
		logger.Error("the channel to the monitor process failed", "err", err)
		return 1
	}
	return code
}
