package irq

import (
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// procIRQ writes /proc/irq/N files as the kernel prints them.
func procIRQ(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	for path, content := range files {
		p := filepath.Join(root, "irq", path)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// TestAffinity: an IRQ with both lists, one whose kernel has no
// effective affinity (CONFIG_GENERIC_IRQ_EFFECTIVE_AFF_MASK off), and one
// freed since it was listed.
func TestAffinity(t *testing.T) {
	proc := procIRQ(t, map[string]string{
		"41/smp_affinity_list": "0-3\n", "41/effective_affinity_list": "2\n",
		"42/smp_affinity_list": "4-5,7\n",
	})
	a, err := ReadAffinity(proc, 41)
	if err != nil || a != (Affinity{Allowed: "0-3", Effective: "2"}) {
		t.Errorf("IRQ 41: %+v, %v", a, err)
	}
	if cpus, err := EffectiveCPUs(proc, 41); err != nil || !slices.Equal(cpus, []int{2}) {
		t.Errorf("IRQ 41 runs on %v (%v), want [2]", cpus, err)
	}
	a, err = ReadAffinity(proc, 42)
	if err == nil || a != (Affinity{Allowed: "4-5,7"}) {
		t.Errorf("IRQ 42: %+v, %v; want the allowed list and the missing file's error", a, err)
	}
	if cpus, err := EffectiveCPUs(proc, 42); err != nil || !slices.Equal(cpus, []int{4, 5, 7}) {
		t.Errorf("IRQ 42 runs on %v (%v), want its allowed CPUs", cpus, err)
	}
	if cpus, err := EffectiveCPUs(proc, 43); err == nil || len(cpus) != 0 {
		t.Errorf("a freed IRQ runs on %v (%v)", cpus, err)
	}
}

// TestCountsFixture sums the rows of a /proc/interrupts as x86 prints it
// (two CPUs, vmxnet3's queue vectors, lines without an IRQ number): the
// IRQs asked for, summed over CPUs; an IRQ not in the file left out.
func TestCountsFixture(t *testing.T) {
	proc := procIRQ(t, nil)
	const file = `           CPU0       CPU1
  0:         44          0   IO-APIC   2-edge      timer
 24:       4012          0  PCI-MSIX-0000:00:05.0   0-edge      eth1-rxtx-0
 25:          3       2890  PCI-MSIX-0000:00:05.0   1-edge      eth1-rxtx-1
 26:          1          0  PCI-MSIX-0000:00:05.0   2-edge      eth1-event-2
NMI:          0          0   Non-maskable interrupts
ERR:          0
`
	if err := os.WriteFile(filepath.Join(proc, "interrupts"), []byte(file), 0o644); err != nil {
		t.Fatal(err)
	}
	var r Interrupts
	got, err := r.Counts(proc, []uint32{24, 25, 99})
	if err != nil {
		t.Fatal(err)
	}
	if want := map[uint32]uint64{24: 4012, 25: 2893}; !maps.Equal(got, want) {
		t.Errorf("Counts = %v, want %v", got, want)
	}
	// A row cut short, or a count that is not one, is an error naming
	// the IRQ; other rows do not matter.
	for _, bad := range []string{" 24:       4012\n", " 24:       4012       x1  PCI-MSIX\n"} {
		if err := os.WriteFile(filepath.Join(proc, "interrupts"), []byte("           CPU0       CPU1\n"+bad+"  7:  x y\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Counts(proc, []uint32{24}); err == nil || !strings.Contains(err.Error(), "IRQ 24") {
			t.Errorf("%q: %v, want an error naming IRQ 24", bad, err)
		}
	}
	if _, err := r.Counts(filepath.Join(proc, "none"), []uint32{24}); err == nil {
		t.Error("no /proc/interrupts, no error")
	}
}

// TestCountsLive reads this kernel's /proc/interrupts: each IRQ's count
// lies between what the file says right before and right after (an
// interrupt may fire in between; none is lost).
func TestCountsLive(t *testing.T) {
	before := sumRows(t)
	irqs := slices.Collect(maps.Keys(before))
	var r Interrupts
	got, err := r.Counts("/proc", irqs)
	if err != nil {
		t.Fatal(err)
	}
	after := sumRows(t)
	if len(irqs) == 0 {
		t.Fatal("no numbered IRQ in /proc/interrupts")
	}
	for _, n := range irqs {
		if v, ok := got[n]; ok && (v < before[n] || v > after[n]) || !ok && after[n] != 0 {
			t.Errorf("IRQ %d: %d (present %v), between %d and %d expected", n, v, ok, before[n], after[n])
		}
	}
}

// sumRows sums /proc/interrupts' numbered rows, each split into fields.
func sumRows(t *testing.T) map[uint32]uint64 {
	t.Helper()
	b, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(b), "\n")
	cpus := len(strings.Fields(lines[0]))
	out := map[uint32]uint64{}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < cpus+1 {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSuffix(f[0], ":"), 10, 32)
		if err != nil {
			continue
		}
		var sum uint64
		for _, v := range f[1 : cpus+1] {
			c, err := strconv.ParseUint(v, 10, 64)
			if err != nil {
				t.Fatalf("IRQ %d: %q", n, v)
			}
			sum += c
		}
		out[uint32(n)] = sum
	}
	return out
}

// BenchmarkCounts is the pcie collector's per-scrape read of
// /proc/interrupts on this machine, for every numbered IRQ it has.
func BenchmarkCounts(b *testing.B) {
	raw, err := os.ReadFile("/proc/interrupts")
	if err != nil {
		b.Fatal(err)
	}
	var irqs []uint32
	for _, line := range strings.Split(string(raw), "\n")[1:] {
		if n, err := strconv.ParseUint(strings.TrimSuffix(strings.Fields(line + " x")[0], ":"), 10, 32); err == nil {
			irqs = append(irqs, uint32(n))
		}
	}
	var r Interrupts
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.Counts("/proc", irqs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(irqs)), "irqs")
}
