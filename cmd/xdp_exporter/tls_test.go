package main

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"golang.org/x/crypto/bcrypt"
)

// getAuth GETs url with client, with basic auth when user is set, and
// returns the status and body.
func getAuth(t *testing.T, client *http.Client, url, user, pass string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if user != "" {
		req.SetBasicAuth(user, pass)
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(body)
}

// TestTLSBasicAuth serves through exporter-toolkit's web config with a
// self-signed certificate and one bcrypt user, as docs/security.md
// describes: the right password scrapes over HTTPS, a wrong or missing one
// gets 401, and plain HTTP to the TLS port gets no metrics.
func TestTLSBasicAuth(t *testing.T) {
	dir := t.TempDir()
	cert := exportertest.SelfSigned(t, dir)
	hash, err := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	webConfig := filepath.Join(dir, "web.yml")
	cfg := "tls_server_config:\n  cert_file: " + filepath.Join(dir, "cert.pem") +
		"\n  key_file: " + filepath.Join(dir, "key.pem") +
		"\nbasic_auth_users:\n  prometheus: " + string(hash) + "\n"
	if err := os.WriteFile(webConfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	e := startExporter(t, "--web.config.file="+webConfig)

	pool := x509.NewCertPool()
	pool.AddCert(cert)
	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}},
	}
	get := func(t *testing.T, url, user, pass string) (int, string) { return getAuth(t, client, url, user, pass) }
	metrics := "https://" + e.Addr + "/metrics"

	t.Run("right password", func(t *testing.T) {
		code, body := get(t, metrics, "prometheus", "s3cret")
		if code != http.StatusOK || !strings.Contains(body, "xdp_exporter_build_info") {
			t.Fatalf("HTTP %d, body:\n%.300s", code, body)
		}
		promtest.CheckMetrics(t, body)
	})
	for _, tc := range []struct{ name, user, pass string }{
		{"wrong password", "prometheus", "wrong"},
		{"unknown user", "mallory", "s3cret"},
		{"no credentials", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if code, body := get(t, metrics, tc.user, tc.pass); code != http.StatusUnauthorized {
				t.Fatalf("HTTP %d, want 401; body:\n%.300s", code, body)
			}
		})
	}
	t.Run("plain HTTP", func(t *testing.T) {
		// Go's TLS server answers a plain-text request with a bare 400.
		resp, err := http.Get("http://" + e.Addr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusBadRequest || strings.Contains(string(body), "xdp_") {
			t.Fatalf("plain HTTP to the TLS port served HTTP %d:\n%.300s", resp.StatusCode, body)
		}
	})
	t.Run("untrusted certificate", func(t *testing.T) {
		_, err := http.Get(metrics)
		var unknown x509.UnknownAuthorityError
		if !errors.As(err, &unknown) {
			t.Fatalf("a client without the CA: err = %v, want an unknown-authority error", err)
		}
	})
}
