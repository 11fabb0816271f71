package napi

import (
	"log/slog"
	"testing"

	"github.com/cilium/ebpf"

	"github.com/xdp-exporter/xdp_exporter/bpf/reap"
	"github.com/xdp-exporter/xdp_exporter/internal/testkit/testenv"
)

// TestPollsTypedAndReaped claims a slot with the generated key type, as
// napi_poll would, and reads it back as a typed record; a device found
// gone on two reads in a row loses its slot.
func TestPollsTypedAndReaped(t *testing.T) {
	testenv.Privileged(t)
	spec, err := Spec()
	testenv.Check(t, err, "loading the napi object")
	o, err := New(spec, false, 0, slog.New(slog.DiscardHandler))
	testenv.Check(t, err, "attaching napi:napi_poll")
	defer o.Close()

	cpus, err := ebpf.PossibleCPU()
	testenv.Check(t, err, "counting CPUs")
	vals := make([]NapiNapiVal, cpus)
	vals[0].Polls[3], vals[0].Exhausted = 7, 2
	dev := reap.Device{Ifindex: 1 << 30, Netns: 4026531840}
	testenv.Check(t, o.PutPolls(dev, NapiNapiCtxCTX_KSOFTIRQD, vals), "claiming a slot")

	// Gone from the first read: the dump that found it gone may predate
	// the device's first poll, so only the second read deletes it.
	fate := reap.Gone
	fateOf := func(d reap.Device) reap.Fate {
		if d == dev {
			return fate
		}
		return reap.Live
	}
	find := func() (Polls, bool) {
		polls, err := o.Polls(fateOf)
		testenv.Check(t, err, "reading the histogram")
		for _, p := range polls {
			if p.Device == dev {
				return p, true
			}
		}
		return Polls{}, false
	}
	p, ok := find()
	if !ok || p.Context != "ksoftirqd" || p.Polls[3] != 7 || p.Exhausted != 2 {
		t.Fatalf("read back %+v (found %v), want ksoftirqd, 7 polls of 3 packets, 2 exhausted", p, ok)
	}
	if _, ok := find(); ok {
		t.Fatal("a gone device kept its slot")
	}
}
