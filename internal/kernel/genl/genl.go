// Package genl is what the readers of generic netlink families (netdev,
// ethtoolnl) share: resolving a family by name, and its dumps, each on a
// socket of its own.
package genl

import (
	"errors"
	"fmt"
	"os"

	"github.com/mdlayher/genetlink"
	"github.com/mdlayher/netlink"

	"github.com/xdp-exporter/xdp_exporter/internal/kernel/nlattr"
)

// Family is a resolved family. It opens a socket per dump: a dump that
// fails part-way (EBUSY while interfaces come and go) leaves its remaining
// replies queued on the socket, and every later request on that socket
// then reads them and fails with "mismatched sequence"; a fresh socket per
// dump cannot be poisoned and lets concurrent scrapes run without sharing
// one.
type Family struct {
	id      uint16
	version uint8
}

// Resolve looks the family up; where the kernel has none, the error wraps
// noFamily (the reader's errors.ErrUnsupported).
func Resolve(name string, version uint8, noFamily error) (*Family, error) {
	conn, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("opening a generic netlink socket: %w", err)
	}
	defer conn.Close()
	fam, err := conn.GetFamily(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("%w (%v)", noFamily, err)
	}
	if err != nil {
		return nil, fmt.Errorf("resolving generic netlink family %q: %w", name, err)
	}
	return &Family{id: fam.ID, version: version}, nil
}

// Dump runs one dump request on a socket of its own.
func (f *Family) Dump(cmd uint8, attrs []byte) ([]genetlink.Message, error) {
	conn, err := genetlink.Dial(nil)
	if err != nil {
		return nil, fmt.Errorf("opening a generic netlink socket: %w", err)
	}
	defer conn.Close()
	req := genetlink.Message{Header: genetlink.Header{Command: cmd, Version: f.version}, Data: attrs}
	return conn.Execute(req, f.id, netlink.Request|netlink.Dump)
}

// DecodeEach runs fn over the attributes of every message, stopping at
// the first malformed one; what names the messages in the error.
func DecodeEach(msgs []genetlink.Message, what string, fn func(ad *netlink.AttributeDecoder) error) error {
	for i, m := range msgs {
		if err := nlattr.Decode(m.Data, fn); err != nil {
			return fmt.Errorf("%s message %d: %w", what, i, err)
		}
	}
	return nil
}

// Close releases nothing: sockets live for one dump.
func (f *Family) Close() error { return nil }
