// Package nltest reads recorded netlink replies for tests: files of one
// message per line in hex, with # comments, as the readers' testdata
// holds them.
package nltest

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mdlayher/genetlink"
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

// Seeds are fuzz seeds from a recording: the whole buffer, then each of
// its messages alone.
func Seeds(b []byte) ([][]byte, error) {
	msgs, ok := Split(b)
	if !ok {
		return nil, errors.New("not a sequence of netlink messages")
	}
	seeds := [][]byte{b}
	for _, m := range msgs {
		raw, err := m.MarshalBinary()
		if err != nil {
			return nil, err
		}
		seeds = append(seeds, raw)
	}
	return seeds, nil
}

// Genl cuts a buffer into generic netlink messages; ok is false when it is
// not a sequence of whole ones.
func Genl(b []byte) ([]genetlink.Message, bool) {
	nms, ok := Split(b)
	if !ok {
		return nil, false
	}
	msgs := make([]genetlink.Message, 0, len(nms))
	for _, nm := range nms {
		var gm genetlink.Message
		if err := gm.UnmarshalBinary(nm.Data); err != nil {
			return nil, false
		}
		msgs = append(msgs, gm)
	}
	return msgs, true
}

// ReadDir reads every recording (*.hex) in dir, in name order, and
// returns them and their concatenation last.
func ReadDir(dir string) ([][]byte, error) {
	paths, err := filepath.Glob(filepath.Join(dir, "*.hex"))
	if err != nil || len(paths) == 0 {
		return nil, fmt.Errorf("no recordings in %s: %v", dir, err)
	}
	var out [][]byte
	var all []byte
	for _, p := range paths {
		b, err := ReadHex(p)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
		all = append(all, b...)
	}
	return append(out, all), nil
}

// AddSeeds adds each seed to the fuzz target, or fails it with err.
func AddSeeds(f *testing.F, seeds [][]byte, err error) {
	f.Helper()
	if err != nil {
		f.Fatal(err)
	}
	for _, s := range seeds {
		f.Add(s)
	}
}

// WriteHex writes msgs as a recording, one message per line in hex after
// the comment's lines, each behind "# ".
func WriteHex(path, comment string, msgs []netlink.Message) error {
	var b strings.Builder
	for _, line := range strings.Split(comment, "\n") {
		b.WriteString("# " + line + "\n")
	}
	for _, m := range msgs {
		raw, err := m.MarshalBinary()
		if err != nil {
			return err
		}
		b.WriteString(hex.EncodeToString(raw) + "\n")
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

// ReadGenl reads a recording of generic netlink messages.
func ReadGenl(path string) ([]genetlink.Message, error) {
	b, err := ReadHex(path)
	if err != nil {
		return nil, err
	}
	msgs, ok := Genl(b)
	if !ok {
		return nil, fmt.Errorf("%s: not generic netlink messages", path)
	}
	return msgs, nil
}

// WriteGenl records generic netlink messages as the kernel sends them in
// a dump, under family's id, with the sequence number and port id of
// every recording (1 and 4000): the same reply recorded twice is the same
// file.
func WriteGenl(path, comment string, family uint16, msgs []genetlink.Message) error {
	nms := make([]netlink.Message, 0, len(msgs))
	for _, gm := range msgs {
		data, err := gm.MarshalBinary()
		if err != nil {
			return err
		}
		nms = append(nms, netlink.Message{
			Header: netlink.Header{Length: uint32(16 + len(data)), Type: netlink.HeaderType(family), Flags: netlink.Multi, Sequence: 1, PID: 4000},
			Data:   data,
		})
	}
	return WriteHex(path, comment, nms)
}
