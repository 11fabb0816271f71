package netlab

import (
	"crypto/rand"
	"encoding/hex"
	"testing"

	"github.com/xdp-exporter/xdp_exporter/internal/testenv"
)

// TestPair makes a pair with unique names for one test and removes it when
// the test ends. It skips, or fails in CI, without the privileges needed.
func TestPair(t testing.TB, queues int) *Pair {
	t.Helper()
	testenv.Privileged(t)
	id := UniqueID()
	p, err := NewPair(PairConfig{
		Namespace: "xdpt-" + id,
		Host:      "xt" + id + "d", // the device under test
		Peer:      "xt" + id + "g", // the generator's end
		Queues:    queues,
	})
	testenv.Check(t, err, "creating netns and veth pair")
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("removing lab pair: %v", err)
		}
	})
	return p
}

// UniqueID returns 8 hex characters, short enough for interface names.
func UniqueID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}
