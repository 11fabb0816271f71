package irq

import (
	"os"
	"path/filepath"
	"slices"
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
