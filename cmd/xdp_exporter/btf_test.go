package main

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/exportertest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/promtest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestWithoutKernelBTF runs the exporter in a private mount namespace
// where /sys/kernel/btf/vmlinux is empty, as on a kernel built without
// CONFIG_DEBUG_INFO_BTF: the tp_btf collectors (xdp, napi) report
// themselves unsupported here (not failed: success stays 1) and say why,
// once, at INFO; everything else serves.
func TestWithoutKernelBTF(t *testing.T) {
	testenv.Privileged(t)
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		testenv.Unavailable(t, "unshare not installed (util-linux)")
		return
	}
	addr := exportertest.FreeAddr(t)
	e := exportertest.Start(t, addr, exec.Command(unshare, "-m", "--propagation", "private", "sh", "-c",
		`mount --bind /dev/null /sys/kernel/btf/vmlinux && exec "$0" "$@"`,
		exportertest.Build(t), "--web.listen-address="+addr))
	body := e.Scrape(t)
	promtest.CheckMetrics(t, body)
	for _, c := range []string{"monitor", "napi"} {
		if !strings.Contains(body, `xdp_scrape_collector_unsupported{collector="`+c+`"} 1`) ||
			!strings.Contains(body, `xdp_scrape_collector_success{collector="`+c+`"} 1`) {
			t.Errorf("%s collector not reported as unsupported (and not failed) without kernel BTF", c)
		}
		const want = "kernel BTF (/sys/kernel/btf/vmlinux) unavailable; tp_btf and fexit programs need a kernel built with CONFIG_DEBUG_INFO_BTF"
		n := 0
		for _, line := range strings.Split(e.Stderr.String(), "\n") {
			if strings.Contains(line, "collector="+c+" ") && strings.Contains(line, want) {
				n++
			}
		}
		if n != 1 {
			t.Errorf("log says %q of the %s collector %d times, want once:\n%s", want, c, n, e.Stderr)
		}
		if strings.Contains(e.Stderr.String(), "level=ERROR") {
			t.Errorf("a missing kernel feature was logged as an error:\n%s", e.Stderr)
		}
	}
	for _, c := range []string{"cpu", "nic", "netdev", "bpf"} {
		if !strings.Contains(body, `xdp_scrape_collector_success{collector="`+c+`"} 1`) {
			t.Errorf("%s collector failed without kernel BTF, which it does not need:\n%s", c, e.Stderr)
		}
	}
}
