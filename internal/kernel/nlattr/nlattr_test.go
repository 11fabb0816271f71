package nlattr

import (
	"errors"
	"testing"

	"github.com/mdlayher/netlink"
)

// TestUint reads the spec's variable-width uint as nla_put_uint writes
// it: 4 bytes when the value fits, 8 otherwise; any other width fails.
func TestUint(t *testing.T) {
	ae := netlink.NewAttributeEncoder()
	ae.Uint32(1, 7)
	ae.Uint64(2, 1<<40)
	ae.Uint16(3, 9)
	b, err := ae.Encode()
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	err = Decode(b, func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
			got = append(got, Uint(ad))
		}
		return nil
	})
	if err == nil {
		t.Fatal("a 2-byte uint decoded without error")
	}
	if len(got) < 2 || got[0] != 7 || got[1] != 1<<40 {
		t.Errorf("decoded %v, want 7 and 2^40 first", got)
	}
	if _, err := DecodeUint([]byte{1, 2, 3}); err == nil {
		t.Error("a 3-byte uint decoded")
	}
}

// TestDecodeErrors: the walker's own error and a malformed buffer both
// come back.
func TestDecodeErrors(t *testing.T) {
	mine := errors.New("stop")
	if err := Decode(nil, func(*netlink.AttributeDecoder) error { return mine }); !errors.Is(err, mine) {
		t.Errorf("the walker's error: %v", err)
	}
	if err := Decode([]byte{0xff, 0x00, 0x01, 0x00}, func(ad *netlink.AttributeDecoder) error {
		for ad.Next() {
		}
		return nil
	}); err == nil {
		t.Error("an attribute longer than its buffer decoded")
	}
}
