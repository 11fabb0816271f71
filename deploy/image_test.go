package deploy

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"debug/elf"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// imageConfig is the part of the OCI/Docker image config the test checks.
type imageConfig struct {
	Config imageSettings `json:"config"`
}

// imageSettings are the settings of the image's container.
type imageSettings struct {
	User         string
	Entrypoint   []string
	Cmd          []string
	ExposedPorts map[string]struct{}
	Labels       map[string]string
}

// TestImage builds the image as `make image` does (scripts/image: one
// image per platform, linux/amd64 and linux/arm64, in one manifest list),
// saves each platform's image, unpacks it and runs the binary found in
// its layer: --version (the arm64 one under qemu-user), then, for amd64,
// the image's own ENTRYPOINT and CMD for one scrape. Containers cannot be
// started on this machine (cgroups v1 hybrid), so the binary runs
// directly; everything else comes from the image.
func TestImage(t *testing.T) {
	podman, err := exec.LookPath("podman")
	if err != nil {
		testenv.Unavailable(t, "podman not installed (apt-get install podman)")
		return
	}
	version := strings.TrimSpace(readFile(t, "../VERSION"))
	archives := buildImages(t, podman, version)
	for arch, machine := range map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64} {
		cfg, files := unpackImage(t, archives[arch])
		c := cfg.Config
		checkImageConfig(t, c, files, version)
		bin, ok := files[path.Clean(strings.TrimPrefix(c.Entrypoint[0], "/"))]
		if !ok {
			t.Fatalf("%s: ENTRYPOINT %s not in the image's layers (%v)", arch, c.Entrypoint[0], keys(files))
		}
		exe := staticBinary(t, bin, machine)
		run := exec.Command(exe, append(c.Entrypoint[1:], "--version")...)
		if arch == "arm64" {
			qemu, err := exec.LookPath("qemu-aarch64")
			if err != nil {
				testenv.Unavailable(t, "qemu-aarch64 not installed (apt-get install qemu-user)")
				continue
			}
			run = exec.Command(qemu, append([]string{exe}, append(c.Entrypoint[1:], "--version")...)...)
		}
		out, err := run.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "xdp_exporter, version "+version+" ") || !strings.Contains(string(out), "linux/"+arch) {
			t.Fatalf("%s: %s --version: %v\n%s", arch, c.Entrypoint[0], err, out)
		}
		if arch == "amd64" {
			scrapeImage(t, exe, c)
		}
	}
}

// scrapeImage scrapes once with exactly the image's ENTRYPOINT and CMD,
// on a free port; the image's default arguments drop capabilities, which
// needs the capabilities to be there in the first place.
func scrapeImage(t *testing.T, exe string, c imageSettings) {
	t.Helper()
	testenv.Privileged(t)
	e := startAt(t, exe, append(append(c.Entrypoint[1:], c.Cmd...), "--web.listen-address="+exportertest.FreeAddr(t))...)
	body := e.Scrape(t)
	promtest.CheckMetrics(t, body)
	if err := exportertest.CheckScrape(body); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "xdp_exporter_build_info{") {
		t.Fatalf("no xdp_exporter_build_info in:\n%.500s", body)
	}
}

// buildImages runs scripts/image under a name of the test's, checks that
// the manifest list holds linux/amd64 and linux/arm64, removes the images
// when the test ends, and returns each platform's image saved as a
// docker-archive.
func buildImages(t *testing.T, podman, version string) map[string]string {
	t.Helper()
	image := "localhost/xdp_exporter-test-" + vethns.UniqueID()
	list := image + ":" + version
	t.Cleanup(func() {
		_ = exec.Command(podman, "manifest", "rm", list).Run()
		if out, err := exec.Command(podman, "rmi", "--force", list+"-amd64", list+"-arm64").CombinedOutput(); err != nil {
			t.Errorf("podman rmi: %v\n%s", err, out)
		}
	})
	build := exec.Command("scripts/image")
	build.Dir = ".."
	build.Env = append(os.Environ(), "IMAGE="+image)
	out, err := build.CombinedOutput()
	if err != nil {
		t.Fatalf("scripts/image: %v\n%s", err, out)
	}
	var manifest struct {
		Manifests []struct {
			Platform struct{ Architecture, OS string }
		}
	}
	inspect, err := exec.Command(podman, "manifest", "inspect", list).Output()
	if err != nil || json.Unmarshal(inspect, &manifest) != nil {
		t.Fatalf("podman manifest inspect %s: %v\n%s", list, err, inspect)
	}
	var platforms []string
	for _, m := range manifest.Manifests {
		platforms = append(platforms, m.Platform.OS+"/"+m.Platform.Architecture)
	}
	if slices.Sort(platforms); !slices.Equal(platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("manifest list %s holds %v, want linux/amd64 and linux/arm64", list, platforms)
	}
	archives := map[string]string{}
	for _, arch := range []string{"amd64", "arm64"} {
		archives[arch] = filepath.Join(t.TempDir(), "image-"+arch+".tar")
		if out, err := exec.Command(podman, "save", "--format", "docker-archive", "-o", archives[arch], list+"-"+arch).CombinedOutput(); err != nil {
			t.Fatalf("podman save: %v\n%s", err, out)
		}
	}
	return archives
}

// checkImageConfig checks the image's ENTRYPOINT, port, labels and that it
// holds only the binary.
func checkImageConfig(t *testing.T, c imageSettings, files map[string][]byte, version string) {
	t.Helper()
	if len(c.Entrypoint) == 0 {
		t.Fatal("image has no ENTRYPOINT")
	}
	if _, ok := c.ExposedPorts["9739/tcp"]; !ok {
		t.Errorf("image exposes %v, want 9739/tcp", c.ExposedPorts)
	}
	for _, l := range []string{"org.opencontainers.image.title", "org.opencontainers.image.source", "org.opencontainers.image.version"} {
		if c.Labels[l] == "" {
			t.Errorf("label %s missing (labels: %v)", l, c.Labels)
		}
	}
	if c.Labels["org.opencontainers.image.version"] != version {
		t.Errorf("VERSION build arg not in the version label: %v", c.Labels)
	}
	if len(files) != 1 {
		t.Errorf("image holds %v, want only the binary", keys(files))
	}
}

// staticBinary writes the image's binary to a file and checks that it is
// statically linked, as FROM scratch needs, for the image's machine.
func staticBinary(t *testing.T, bin []byte, machine elf.Machine) string {
	t.Helper()
	exe := filepath.Join(t.TempDir(), "xdp_exporter")
	if err := os.WriteFile(exe, bin, 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	if f.Machine != machine {
		t.Errorf("the image's binary is for %v, want %v", f.Machine, machine)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the binary in the image is dynamically linked: it cannot run FROM scratch")
		}
	}
	f.Close()
	return exe
}

// unpackImage reads a docker-archive: manifest.json names the config and
// the layers; the layers are (possibly gzipped) tars applied in order.
func unpackImage(t *testing.T, archive string) (imageConfig, map[string][]byte) {
	t.Helper()
	entries := readTar(t, archive, nil)
	var manifest []struct {
		Config string
		Layers []string
	}
	if err := json.Unmarshal(entries["manifest.json"], &manifest); err != nil || len(manifest) != 1 {
		t.Fatalf("manifest.json: %v (%d images)", err, len(manifest))
	}
	var cfg imageConfig
	if err := json.Unmarshal(entries[manifest[0].Config], &cfg); err != nil {
		t.Fatalf("image config %s: %v", manifest[0].Config, err)
	}
	files := map[string][]byte{}
	for _, layer := range manifest[0].Layers {
		b, ok := entries[layer]
		if !ok {
			t.Fatalf("layer %s missing from the archive", layer)
		}
		readTar(t, "", b, files)
	}
	return cfg, files
}

// readTar returns the regular files of a tar read from path or from data,
// gunzipping it first if needed, adding them to into when given.
func readTar(t *testing.T, file string, data []byte, into ...map[string][]byte) map[string][]byte {
	t.Helper()
	var r io.Reader
	if file != "" {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		r = f
	} else {
		r = bytes.NewReader(data)
	}
	br := bufio.NewReader(r)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	} else {
		r = br
	}
	out := map[string][]byte{}
	if len(into) > 0 {
		out = into[0]
	}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("reading tar: %v", err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		out[path.Clean(strings.TrimPrefix(h.Name, "./"))] = b
	}
}

func keys(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// startAt starts bin with a complete argument list, the listen address
// among them.
func startAt(t *testing.T, bin string, args ...string) *exportertest.Process {
	t.Helper()
	addr := ""
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--web.listen-address="); ok {
			addr = v
		}
	}
	if addr == "" {
		t.Fatalf("startExporterAt: no --web.listen-address in %v", args)
	}
	return exportertest.Start(t, addr, exec.Command(bin, args...))
}
