// Package nltest reads recorded netlink replies for tests: files of one
// message per line in hex, with # comments, as the readers' testdata
// holds them.
package nltest

import (
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"os"
	"strings"

	"github.com/mdlayher/netlink"
)

// ReadHex reads a file of messages as one buffer, as the kernel sends a
// dump.
func ReadHex(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []byte
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		raw, err := hex.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		out = append(out, raw...)
	}
	if _, ok := Split(out); !ok {
		return nil, fmt.Errorf("%s: not a sequence of netlink messages", path)
	}
	return out, nil
}

// Split cuts a buffer into netlink messages; ok is false when it is not a
// sequence of whole messages.
func Split(b []byte) (msgs []netlink.Message, ok bool) {
	for len(b) > 0 {
		if len(b) < 16 {
			return nil, false
		}
		l := int(binary.NativeEndian.Uint32(b))
		aligned := (l + 3) &^ 3
		if l < 16 || aligned > len(b) {
			return nil, false
		}
		var m netlink.Message
		if err := m.UnmarshalBinary(b[:aligned]); err != nil {
			return nil, false
		}
		msgs = append(msgs, m)
		b = b[aligned:]
	}
	return msgs, true
}
