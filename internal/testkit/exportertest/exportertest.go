// Package exportertest builds and runs the real xdp_exporter binary for
// end-to-end tests.
package exportertest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// BinaryEnv names a prebuilt exporter binary for Build to return instead
// of building one: the kernel matrix builds it once on the host, and its
// guests, which have no time to run the Go toolchain, test that binary.
const BinaryEnv = "XDP_EXPORTER_BINARY"

// Build compiles cmd/xdp_exporter once per test binary, as `make build`
// does: without cgo, so the binary is static and capability changes reach
// every thread.
func Build(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv(BinaryEnv); bin != "" {
		return bin
	}
	buildOnce.Do(func() {
		_, here, _, _ := runtime.Caller(0)
		pkg := filepath.Join(filepath.Dir(here), "..", "..", "..", "cmd", "xdp_exporter")
		dir, err := os.MkdirTemp("", "xdp_exporter-test")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "xdp_exporter")
		build := exec.Command("go", "build", "-o", binPath, ".")
		build.Dir = pkg
		build.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := build.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// FreeAddr returns a loopback address no one listens on right now.
func FreeAddr(t testing.TB) string {
	t.Helper()
	return FreeAddrOn(t, "127.0.0.1")
}

// FreeAddrOn is FreeAddr on the loopback address ip (127.0.0.2 and so
// on): exporters on addresses of their own stand for hosts of their own,
// the instance label without the port telling them apart.
func FreeAddrOn(t testing.TB, ip string) string {
	t.Helper()
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// Log collects a process's stderr; tests read it while the process writes.
type Log struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *Log) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *Log) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// Process is a running exporter.
type Process struct {
	Addr    string
	Cmd     *exec.Cmd
	Stderr  *Log
	done    chan error
	stopped bool
}

// Start runs cmd (the exporter, or a wrapper such as capsh around it),
// which must listen on addr, and waits until it answers. It is stopped
// with SIGINT at the end of the test unless Stop ran first.
func Start(t testing.TB, addr string, cmd *exec.Cmd) *Process {
	t.Helper()
	p := &Process{Addr: addr, Cmd: cmd, Stderr: &Log{}, done: make(chan error, 1)}
	cmd.Stderr = p.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.done <- cmd.Wait() }()
	t.Cleanup(func() { p.Stop(t) })
	deadline := time.Now().Add(20 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/")
		if err == nil {
			resp.Body.Close()
			return p
		}
		select {
		case err := <-p.done:
			p.done <- err
			t.Fatalf("exporter exited before answering: %v; log:\n%s", err, p.Stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("exporter did not answer on %s: %v; log:\n%s", addr, err, p.Stderr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Run starts the built binary with args, listening on addr.
func Run(t testing.TB, addr string, args ...string) *Process {
	t.Helper()
	return Start(t, addr, exec.Command(Build(t), append([]string{"--web.listen-address=" + addr}, args...)...))
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *Process) Kill(t testing.TB) {
	t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	if err := p.Cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-p.done
}

// Exited waits up to d for the process to end on its own and returns how
// it ended; the test fails if it does not.
func (p *Process) Exited(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case err := <-p.done:
		p.stopped = true
		return err
	case <-time.After(d):
		t.Fatalf("the exporter did not exit within %v; log:\n%s", d, p.Stderr)
		return nil
	}
}

// Stop sends SIGINT and waits for a clean exit; it is safe to call twice.
func (p *Process) Stop(t testing.TB) {
	t.Helper()
	if p.stopped {
		return
	}
	p.stopped = true
	_ = p.Cmd.Process.Signal(os.Interrupt)
	select {
	case err := <-p.done:
		if err != nil {
			t.Errorf("exporter exited with %v; log:\n%s", err, p.Stderr)
		}
	case <-time.After(10 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
		t.Errorf("exporter did not stop within 10s of SIGINT; log:\n%s", p.Stderr)
	}
}

// Scrape fetches /metrics and returns the body.
func (p *Process) Scrape(t testing.TB) string {
	t.Helper()
	resp, err := http.Get("http://" + p.Addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape: HTTP %d\n%s", resp.StatusCode, body)
	}
	return string(body)
}

// Families scrapes and parses /metrics.
func (p *Process) Families(t testing.TB) Families {
	t.Helper()
	return Parse(t, p.Scrape(t))
}

// Sum scrapes and adds up every sample of a counter, gauge or untyped
// family whose labels include the given name/value pairs.
func (p *Process) Sum(t testing.TB, family string, labels ...string) float64 {
	t.Helper()
	sum, _ := p.Families(t).Sum(family, labels...)
	return sum
}

// SelfSigned writes a fresh self-signed certificate for 127.0.0.1 and its
// key into dir and returns the certificate for the client's trust pool.
func SelfSigned(t testing.TB, dir string) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "xdp_exporter test"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	write := func(name, typ string, b []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b}), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("cert.pem", "CERTIFICATE", der)
	write("key.pem", "EC PRIVATE KEY", keyDER)
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
