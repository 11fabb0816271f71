package xdpdispatch

import (
	"encoding/binary"
	"encoding/hex"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/vethtest"
)

// TestDecodeConfig decodes the configuration of a version 2 dispatcher as
// Debian's libxdp 1.3.1 filled it for two components of priority 50
// chain-calling on XDP_PASS (read in the kernel matrix's guests), a
// version 1 layout as protocol.org gives it, and refuses what is neither.
func TestDecodeConfig(t *testing.T) {
	v2, _ := hex.DecodeString("ec020200" + "04000080" + "04000080" + strings.Repeat("00000000", 8) +
		"32000000" + "32000000" + strings.Repeat("00000000", 8) + strings.Repeat("00000000", 10))
	c, err := decodeConfig(v2)
	if err != nil {
		t.Fatal(err)
	}
	if c.version != 2 || c.enabled != 2 || c.actions[0] != 1<<2|1<<stubRetval || c.actions[1] != c.actions[0] || c.priority[0] != 50 || c.priority[1] != 50 || c.actions[2] != 0 {
		t.Errorf("version 2: %+v", c)
	}
	v1 := make([]byte, 84)
	v1[0] = 1
	v1[4] = 1<<1 | 1<<2 // drop and pass
	v1[44] = 10
	if c, err := decodeConfig(v1); err != nil || c.version != 1 || c.enabled != 1 || c.actions[0] != 6 || c.priority[0] != 10 {
		t.Errorf("version 1: %+v, %v", c, err)
	}
	v3 := slices.Clone(v2)
	v3[1] = 3
	for name, b := range map[string][]byte{"version 3": v3, "short": v2[:40], "too many programs": append([]byte{magic, 2, 11}, v2[3:]...)} {
		if _, err := decodeConfig(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
	comp := Component{ChainCallActions: 1<<1 | 1<<2}
	if got := comp.ChainCallNames(); got != "drop,pass" {
		t.Errorf("chain-call names %q, want drop,pass", got)
	}
	if !comp.ChainCalls(2) || comp.ChainCalls(3) || comp.ChainCalls(40) {
		t.Error("ChainCalls disagrees with the bitmap")
	}
}

const sized = "../../../bpf/xdptest/sized_bpfel.o"

func loader(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command("xdp-loader", args...).CombinedOutput(); err != nil {
		t.Fatalf("xdp-loader %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func attached(t *testing.T, dev string) *ebpf.Program {
	t.Helper()
	p, err := ebpf.NewProgramFromID(ebpf.ProgramID(vethtest.AttachedXDP(t, dev)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// TestReadDispatcher loads a program with xdp-loader, as a user does.
// Where the kernel runs libxdp's dispatcher (freplace), it adds a second
// and removes the first, reading the dispatcher after each step: its
// components by slot, each with libxdp's default priority (50) and
// chain-call action (pass), the same as libxdp's own pins say. Where
// libxdp loads the program alone, Read says it is no dispatcher.
func TestReadDispatcher(t *testing.T) {
	if _, err := exec.LookPath("xdp-loader"); err != nil {
		t.Fatalf("xdp-loader not installed (xdp-tools; make deps): %v", err)
	}
	pair := vethtest.Pair(t, 1)
	dev := pair.Host.Name
	t.Cleanup(func() { _ = exec.Command("xdp-loader", "unload", "--all", dev).Run() })
	loader(t, "load", "-m", "native", dev, sized)
	p := attached(t, dev)
	d, err := Read(p, uint32(pair.Host.Index), "/sys/fs/bpf")
	if err != nil {
		t.Fatal(err)
	}
	info, err := p.Info()
	if err != nil {
		t.Fatal(err)
	}
	if info.Name != Name {
		if d != nil {
			t.Fatalf("program %q read as a dispatcher: %+v", info.Name, d)
		}
		t.Logf("libxdp loaded %q alone: this kernel does not run its dispatcher", info.Name)
		return
	}
	check := func(step string, n int) *Dispatcher {
		t.Helper()
		p := attached(t, dev)
		d, err := Read(p, uint32(pair.Host.Index), "/sys/fs/bpf")
		if err != nil || d == nil {
			t.Fatalf("%s: %+v, %v", step, d, err)
		}
		if len(d.Components) != n || d.Version != 2 {
			t.Fatalf("%s: %+v, want %d components of a version 2 dispatcher", step, d, n)
		}
		pins, err := pinnedSlots(filepath.Join("/sys/fs/bpf/xdp", "dispatch-"+strconv.Itoa(pair.Host.Index)+"-"+strconv.Itoa(int(d.Prog))))
		if err != nil {
			t.Fatal(err)
		}
		for i, c := range d.Components {
			if c.Slot != i || c.Priority != 50 || c.ChainCallNames() != "pass" || c.Link == 0 {
				t.Errorf("%s: component %+v, want slot %d, priority 50, chain-call pass and a link", step, c, i)
			}
			if pin := pins[c.Slot]; pin.Prog != c.Prog || pin.Link != c.Link {
				t.Errorf("%s: slot %d is program %d (link %d), libxdp's pins say %d (link %d)", step, c.Slot, c.Prog, c.Link, pin.Prog, pin.Link)
			}
		}
		if got := slices.Sorted(maps.Keys(pins)); len(got) != n {
			t.Errorf("%s: libxdp pinned slots %v, want %d", step, got, n)
		}
		return d
	}
	first := check("one program", 1)
	if !first.Components[0].Entry {
		t.Logf("a lone component replaces a stub, not the entry function: %+v", first.Components[0])
	}
	loader(t, "load", "-m", "native", dev, sized)
	second := check("two programs", 2)
	for _, c := range second.Components {
		if c.Entry {
			t.Errorf("two programs: component %+v replaces the entry function, want a stub each", c)
		}
	}
	if second.Prog == first.Prog || second.Components[0].Prog != first.Components[0].Prog {
		t.Errorf("adding a program: dispatcher %d -> %d, first component %d -> %d; want a new dispatcher calling the same first program",
			first.Prog, second.Prog, first.Components[0].Prog, second.Components[0].Prog)
	}
	loader(t, "unload", "--id", strconv.Itoa(int(first.Components[0].Prog)), dev)
	third := check("the first removed", 1)
	if third.Components[0].Prog != second.Components[1].Prog {
		t.Errorf("after removing the first, slot 0 is %d, want the second program %d", third.Components[0].Prog, second.Components[1].Prog)
	}
}

// FuzzDecodeConfig: any bytes decode to a configuration of version 1 or
// 2 with at most ten programs enabled, or are refused; a decoded
// configuration encodes back to the bytes it read.
func FuzzDecodeConfig(f *testing.F) {
	v2, _ := hex.DecodeString("ec020200" + "04000080" + "04000080" + strings.Repeat("00000000", 8) +
		"32000000" + "32000000" + strings.Repeat("00000000", 8) + strings.Repeat("00000000", 10))
	f.Add(v2)
	f.Add(make([]byte, 84))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := decodeConfig(b)
		if err != nil {
			return
		}
		if c.version != 1 && c.version != 2 || c.enabled > Slots {
			t.Fatalf("decoded %+v", c)
		}
		for i := range Slots {
			if binary.NativeEndian.Uint32(b[4+4*i:]) != c.actions[i] || binary.NativeEndian.Uint32(b[4+4*Slots+4*i:]) != c.priority[i] {
				t.Fatalf("slot %d: %+v does not match its bytes", i, c)
			}
		}
	})
}
