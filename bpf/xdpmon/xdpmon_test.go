package xdpmon

import "testing"

// TestOverflowMapsNameEveryCounter ties the overflow counters, indexed by
// enum ovf_map of xdpmon.c, to the maps they count for: a counter added
// to the enum without a name here fails.
func TestOverflowMapsNameEveryCounter(t *testing.T) {
	spec, err := Spec()
	if err != nil {
		t.Fatal(err)
	}
	for i := range XdpmonOvfMapOVF_MAX {
		name, ok := overflowMaps[i]
		if !ok {
			t.Errorf("overflow counter %d has no map", i)
			continue
		}
		if spec.Maps[name] == nil {
			t.Errorf("overflow counter %d names map %q, which the object lacks", i, name)
		}
	}
	if n := spec.Maps[XdpmonMapOverflow].MaxEntries; n != uint32(XdpmonOvfMapOVF_MAX) {
		t.Errorf("the overflow map has %d entries, the enum %d", n, XdpmonOvfMapOVF_MAX)
	}
}
