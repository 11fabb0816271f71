package bpfprog

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/xdp-exporter/xdp_exporter/bpf/xdptest"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestReadProgram reads a program the test loads by its id, as bpftool
// does: its name and tag, then, once it is unloaded, nothing.
func TestReadProgram(t *testing.T) {
	testenv.Privileged(t)
	testenv.Check(t, CheckList(), "listing programs")
	prog, err := xdptest.Verdict("bpfprog_read", xdptest.Pass)
	testenv.Check(t, err, "loading a program")
	info, err := prog.Info()
	if err != nil {
		t.Fatal(err)
	}
	id, _ := info.ID()
	r := NewReader()
	p, err := r.Read(id)
	if err != nil || p == nil {
		t.Fatalf("Read(%d) = %v, %v", id, p, err)
	}
	if p.Name != "bpfprog_read" || p.Tag != info.Tag {
		t.Errorf("read %+v, want name bpfprog_read and tag %s", p, info.Tag)
	}
	prog.Close()
	// The kernel frees a program's id after an RCU grace period.
	deadline := time.Now().Add(10 * time.Second)
	for {
		p, err := r.Read(id)
		if err == nil && p == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("program %d still read 10 s after it was unloaded: %+v, %v", id, p, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	r.Keep(func(ebpf.ProgramID) bool { return false })
	if len(r.meta) != 0 {
		t.Errorf("Keep of nothing kept %d programs", len(r.meta))
	}
}

// TestXDPLinks finds the bpf_link that holds a program on a veth.
func TestXDPLinks(t *testing.T) {
	pair := vethtest.Pair(t, 1)
	prog, err := xdptest.Verdict("bpfprog_link", xdptest.Pass)
	testenv.Check(t, err, "loading a program")
	defer prog.Close()
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: pair.Host.Index})
	testenv.Check(t, err, "attaching XDP")
	defer l.Close()
	info, err := l.Info()
	if err != nil {
		t.Fatal(err)
	}
	links, err := XDPLinks()
	if err != nil {
		t.Fatal(err)
	}
	got := links[LinkKey{Ifindex: pair.Host.Index, Prog: info.Program}]
	if len(got) != 1 || got[0] != info.ID {
		t.Errorf("links of %s: %v, want [%d]", pair.Host.Name, got, info.ID)
	}
}

// TestStatsEnabled reads kernel.bpf_stats_enabled from a procfs tree.
func TestStatsEnabled(t *testing.T) {
	for content, want := range map[string]bool{"1\n": true, "0\n": false} {
		proc := t.TempDir()
		path := filepath.Join(proc, "sys", "kernel", "bpf_stats_enabled")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		if got, err := StatsEnabled(proc); err != nil || got != want {
			t.Errorf("%q: %v, %v; want %v", content, got, err, want)
		}
	}
	if _, err := StatsEnabled(t.TempDir()); err == nil {
		t.Error("a procfs without the sysctl read without error")
	}
}
