// Package nlattr decodes netlink attributes with mdlayher/netlink: every
// reply of every family the exporter reads (rtnetlink, generic netlink,
// sock_diag) ends in them.
package nlattr

import (
	"encoding/binary"
	"fmt"

	"github.com/mdlayher/netlink"
)

// Decode walks the netlink attributes in b with fn, and fails with the
// first error fn or the decoder met.
func Decode(b []byte, fn func(ad *netlink.AttributeDecoder) error) error {
	ad, err := netlink.NewAttributeDecoder(b)
	if err != nil {
		return err
	}
	if err := fn(ad); err != nil {
		return err
	}
	return ad.Err()
}

// DecodeUint reads the YNL specs' variable-width "uint" type: the kernel's
// nla_put_uint writes 4 bytes when the value fits and 8 otherwise.
func DecodeUint(b []byte) (uint64, error) {
	switch len(b) {
	case 4:
		return uint64(binary.NativeEndian.Uint32(b)), nil
	case 8:
		return binary.NativeEndian.Uint64(b), nil
	}
	return 0, fmt.Errorf("uint attribute of %d bytes, want 4 or 8", len(b))
}

// Uint reads the decoder's current attribute as a spec "uint".
func Uint(ad *netlink.AttributeDecoder) uint64 {
	var v uint64
	ad.Do(func(b []byte) error {
		var err error
		v, err = DecodeUint(b)
		return err
	})
	return v
}
