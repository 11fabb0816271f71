package lab

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/lab/vethns"
)

// snapshot captures what `xdp-lab down` must restore: the namespaces,
// links and raw-table rules the lab could touch. Tests of other packages
// make their own namespaces and veths concurrently, so only lines that
// could be the lab's are kept: anything named as lb's namespace or
// devices, and the whole raw table.
func snapshot(t *testing.T, lb Lab) string {
	t.Helper()
	var b strings.Builder
	for _, args := range [][]string{{"ip", "netns", "list"}, {"ip", "-o", "link", "show"}, {"iptables", "-t", "raw", "-S"}} {
		out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		b.WriteString(strings.Join(args, " ") + "\n")
		for _, line := range strings.Split(string(out), "\n") {
			if args[0] == "iptables" || strings.Contains(line, lb.Namespace) || strings.Contains(line, lb.DUT[:len(lb.DUT)-1]) {
				b.WriteString(line + "\n")
			}
		}
	}
	return b.String()
}

func TestUpDownRestoresHost(t *testing.T) {
	testenv.Privileged(t)
	lb := ForTest(vethns.UniqueID())
	if _, err := exec.LookPath("iptables"); err != nil {
		testenv.Unavailable(t, "iptables not installed")
	}
	before := snapshot(t, lb)
	if err := lb.Up(2); err != nil {
		t.Fatal(err)
	}
	// Re-running up on a made lab is a no-op; a different queue count is refused.
	if err := lb.Up(2); err != nil {
		t.Fatalf("second up: %v", err)
	}
	if err := lb.Up(1); err == nil || !strings.Contains(err.Error(), "xdp-lab down") {
		t.Fatalf("up with another queue count: %v, want a hint to run down", err)
	}
	// A baseline rule left behind by a crashed run is removed by down too.
	if _, err := lb.addRawDrop(); err != nil {
		t.Fatal(err)
	}
	if err := lb.Down(); err != nil {
		t.Fatal(err)
	}
	if after := snapshot(t, lb); after != before {
		t.Fatalf("host state differs after up+down:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	if err := lb.Down(); err != nil {
		t.Fatalf("down on a lab that is gone: %v", err)
	}
}

func TestUpRecoversHalfMadeLab(t *testing.T) {
	testenv.Privileged(t)
	lb := ForTest(vethns.UniqueID())
	if err := lb.Up(1); err != nil {
		t.Fatal(err)
	}
	defer lb.Down()
	if err := deleteLink(netlinkHandle(), lb.Egress); err != nil {
		t.Fatal(err)
	}
	if err := lb.Up(1); err != nil {
		t.Fatalf("up on a half-made lab: %v", err)
	}
	for _, l := range lb.Links() {
		if out, err := exec.Command("ip", "link", "show", l.Host).CombinedOutput(); err != nil {
			t.Fatalf("%s missing after recovery: %s", l.Host, out)
		}
	}
}

func TestUpBadInput(t *testing.T) {
	testenv.Privileged(t)
	lb := ForTest(vethns.UniqueID())
	before := snapshot(t, lb)
	if err := lb.Up(MaxQueues + 1); err == nil || !strings.Contains(err.Error(), "queues") {
		t.Fatalf("too many queues: %v", err)
	}
	if after := snapshot(t, lb); after != before {
		t.Fatalf("a refused up left state behind:\n%s", after)
	}
}
