package uncore

import (
	"math/bits"
	"testing"
)

// FuzzEncode: a format file and an event string that parse encode
// without panicking, and an encoded term sets no bit outside its format.
func FuzzEncode(f *testing.F) {
	f.Add("config:8-15,32-57", "umask=0xcc43fe04")
	f.Add("config1:41-50", "filter_opc0=0x248,filter_opc0")
	f.Add("config:36-47", "umask=0x1,config1=0x4903300000000")
	f.Fuzz(func(t *testing.T, format, event string) {
		ft, err := ParseFormat(format)
		if err != nil {
			return
		}
		terms, err := ParseTerms(event)
		if err != nil {
			return
		}
		var mask uint64
		for _, b := range ft.Bits {
			mask |= 1 << b
		}
		for _, term := range terms {
			term.Name = "umask"
			a, err := Encode(1, map[string]Format{"umask": ft}, []Term{term})
			if err != nil {
				if bits.Len64(term.Value) <= len(ft.Bits) && len(ft.Bits) <= 64 {
					t.Fatalf("%q in %q refused: %v", event, format, err)
				}
				continue
			}
			got := map[string]uint64{"config": a.Config, "config1": a.Config1, "config2": a.Config2}[ft.Field]
			if got&^mask != 0 || bits.OnesCount64(got) != bits.OnesCount64(term.Value) {
				t.Fatalf("%#x through %q gave %#x", term.Value, format, got)
			}
		}
	})
}
