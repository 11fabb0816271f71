package drop

import (
	"errors"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"

	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestDropReasonNames names reasons from the running kernel's BTF: a
// value of enum skb_drop_reason by its name, one the enum lacks by its
// number.
func TestDropReasonNames(t *testing.T) {
	kernel, err := btf.LoadKernelSpec()
	testenv.Check(t, err, "kernel BTF")
	r, err := NewReasons(kernel, btf.LoadKernelModuleSpec)
	if testenv.KernelBefore(t, 5, 17) {
		if !errors.Is(err, ErrNoReasons) {
			t.Fatalf("before 5.17 drop reasons must be ErrNoReasons, got %v", err)
		}
		return
	}
	testenv.Check(t, err, "reading drop reasons")
	var reasons *btf.Enum
	testenv.Check(t, kernel.TypeByName("skb_drop_reason", &reasons), "enum skb_drop_reason")
	want := map[string]bool{"NOT_SPECIFIED": false, "NO_SOCKET": false, "NETFILTER_DROP": false}
	var largest uint32
	for _, v := range reasons.Values {
		largest = max(largest, uint32(v.Value)&0xffff)
		name := strings.TrimPrefix(v.Name, "SKB_DROP_REASON_")
		if _, ok := want[name]; ok {
			if got := r.Name(uint32(v.Value)); got != name {
				t.Errorf("reason %d named %q, want %q", v.Value, got, name)
			}
			want[name] = true
		}
	}
	for name, seen := range want {
		if !seen {
			t.Errorf("the kernel's enum skb_drop_reason has no %s", name)
		}
	}
	unnamed := largest + 1
	if got := r.Name(unnamed); got != strconv.FormatUint(uint64(unnamed), 10) {
		t.Errorf("reason %d, which the kernel does not name, labelled %q", unnamed, got)
	}
}

// TestDropSubsystemReasonNames names a subsystem's reason from the BTF of
// its module: openvswitch's first reason is OVS_DROP_LAST_ACTION
// (net/openvswitch/drop.h), value 1 in the subsystem's upper bits. Where
// the kernel has no such subsystem, the value is its number.
func TestDropSubsystemReasonNames(t *testing.T) {
	testenv.Privileged(t)
	kernel, err := btf.LoadKernelSpec()
	testenv.Check(t, err, "kernel BTF")
	if testenv.KernelBefore(t, 5, 17) {
		return // no drop reasons at all: TestDropReasonNames checks the report
	}
	var subsys *btf.Enum
	var ovs uint32
	if err := kernel.TypeByName("skb_drop_reason_subsys", &subsys); err == nil {
		for _, v := range subsys.Values {
			if v.Name == "SKB_DROP_REASON_SUBSYS_OPENVSWITCH" {
				ovs = uint32(v.Value)
			}
		}
	}
	r, err := NewReasons(kernel, btf.LoadKernelModuleSpec)
	testenv.Check(t, err, "reading drop reasons")
	if ovs == 0 {
		if got := r.Name(2<<16 | 1); got != strconv.Itoa(2<<16|1) {
			t.Errorf("a subsystem reason on a kernel without subsystems is labelled %q", got)
		}
		return
	}
	if _, err := os.Stat("/sys/module/openvswitch"); err != nil {
		out, err := exec.Command("modprobe", "openvswitch").CombinedOutput()
		if err != nil {
			// A kernel built without it (this project's development VM):
			// the kernel matrix requires the test to pass on Debian's 6.12.
			t.Skipf("this kernel has no openvswitch (modprobe: %v: %s)", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("modprobe", "-r", "openvswitch").Run() })
	}
	if got := r.Name(ovs<<16 | 1); got != "OVS_DROP_LAST_ACTION" {
		t.Errorf("openvswitch reason %#x labelled %q, want OVS_DROP_LAST_ACTION", ovs<<16|1, got)
	}
}
