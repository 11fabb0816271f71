package archtest

import (
	"encoding/json"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is the import path every package of the tree starts with.
const module = "github.com/xdp-exporter/xdp_exporter"

// Role is the part a package plays in the tree (docs/dev/architecture.md).
type Role string

const (
	// Reader: a kernel interface read into typed Go values
	// (internal/kernel/...).
	Reader Role = "kernel reader"
	// BPFObject: a BPF program, its bpf2go output and loader (bpf/...).
	BPFObject Role = "BPF object"
	// Collector: the scrape framework and collectors (collector/), with
	// their building blocks (collector/internal/...).
	Collector Role = "collector"
	// TestSupport: what only tests use: internal/testkit/..., beside the
	// readers they serve the packages named *test (nltest's recorded
	// netlink replies, pcitest's sysfs trees), and the kernel matrix
	// (kernelmatrix/: its QEMU runner and the programs its guests run).
	TestSupport Role = "test support"
	// Above: what uses the collector or the readers: binaries, the lab,
	// the dashboards, the METRICS.md generator, the kernel matrix.
	Above Role = "above the collector"
)

// roleOf is the role of a package by its path in the module.
func roleOf(pkg string) Role {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
	under := func(dir string) bool { return rel == dir || strings.HasPrefix(rel, dir+"/") }
	switch {
	case under("internal/testkit"), under("internal/kernel") && strings.HasSuffix(rel, "test"), under("kernelmatrix"):
		return TestSupport
	case under("internal/kernel"):
		return Reader
	case under("bpf"):
		return BPFObject
	case rel == "collector", under("collector/internal"):
		return Collector
	}
	return Above
}

// pkgInfo is what go list says of one package.
type pkgInfo struct {
	ImportPath                         string
	Imports, TestImports, XTestImports []string
	Deps                               []string
}

// packages lists every package of the tree with its imports and
// dependencies (non-test).
func packages(t *testing.T) map[string]pkgInfo {
	t.Helper()
	cmd := exec.Command("go", "list", "-json=ImportPath,Imports,TestImports,XTestImports,Deps", "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	pkgs := map[string]pkgInfo{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkgInfo
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs[p.ImportPath] = p
	}
	return pkgs
}

// dependsOn reports whether pkg is target or depends on it (non-test).
func dependsOn(pkgs map[string]pkgInfo, pkg, target string) bool {
	return pkg == target || slices.Contains(pkgs[pkg].Deps, target)
}

// TestRoles holds each package to its role:
//   - no package but test support imports test support;
//   - no kernel reader or BPF object, nor any of their tests, depends on
//     the collector or on client_golang;
//   - no package under internal/ depends on the collector: what uses it
//     lives above it, outside internal/, or inside collector/;
//   - the collector speaks no kernel protocol itself: no netlink
//     package, no syscall.
func TestRoles(t *testing.T) {
	pkgs := packages(t)
	collector := module + "/collector"
	for path, p := range pkgs {
		role := roleOf(path)
		for _, imp := range p.Imports {
			if roleOf(imp) == TestSupport && role != TestSupport && strings.HasPrefix(imp, module) {
				t.Errorf("%s (%s) imports the test support %s", path, role, imp)
			}
		}
		if role == Reader || role == BPFObject {
			for _, imp := range slices.Concat([]string{path}, p.TestImports, p.XTestImports) {
				if dependsOn(pkgs, imp, collector) {
					t.Errorf("%s (%s) or its tests depend on the collector through %s", path, role, imp)
				}
			}
			if slices.ContainsFunc(p.Deps, isClientGolang) {
				t.Errorf("%s (%s) depends on client_golang", path, role)
			}
		}
		if strings.HasPrefix(path, module+"/internal/") && dependsOn(pkgs, path, collector) {
			t.Errorf("%s is under internal/ and depends on the collector", path)
		}
		if path == collector {
			for _, imp := range p.Imports {
				if strings.Contains(imp, "netlink") || imp == "syscall" {
					t.Errorf("collector imports %s; kernel protocols belong to the readers under internal/kernel", imp)
				}
			}
		}
	}
}

func isClientGolang(dep string) bool {
	return strings.HasPrefix(dep, "github.com/prometheus/client_golang")
}

// TestBinariesLinkNoTestCode lists what the shipped binaries link: none
// carries the testing package or test support, and the exporter carries
// nothing of the lab (its traffic generator and BPF program).
func TestBinariesLinkNoTestCode(t *testing.T) {
	pkgs := packages(t)
	for bin, lab := range map[string]bool{"cmd/xdp_exporter": false, "cmd/xdp-lab": true, "cmd/xdp-top": true} {
		for _, dep := range pkgs[module+"/"+bin].Deps {
			rel := strings.TrimPrefix(dep, module+"/")
			switch {
			case dep == "testing", roleOf(dep) == TestSupport && strings.HasPrefix(dep, module):
				t.Errorf("%s links %s", bin, dep)
			case !lab && (rel == "lab" || strings.HasPrefix(rel, "lab/")):
				t.Errorf("%s links the lab's %s", bin, dep)
			}
		}
	}
}

// TestOneNetlinkLibrary: the exporter speaks netlink through mdlayher's
// netlink and genetlink alone; vishvananda/netlink, which tests use to
// make devices, once came back into the collector's tree through the tc
// reader's message types.
func TestOneNetlinkLibrary(t *testing.T) {
	pkgs := packages(t)
	for _, pkg := range []string{module + "/collector", module + "/cmd/xdp_exporter"} {
		for _, dep := range pkgs[pkg].Deps {
			if strings.HasPrefix(dep, "github.com/vishvananda/netlink") {
				t.Errorf("%s links %s beside mdlayher/netlink", pkg, dep)
			}
		}
	}
}
