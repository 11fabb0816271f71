package pci

import (
	"math"
	"strings"
	"testing"
)

// FuzzPCIeSysfs feeds the parsers of the link and AER files arbitrary
// contents: a speed parses to a finite, non-negative rate or is refused,
// a bandwidth is finite and non-negative, and every AER count has a name
// without blanks that is not a TOTAL_ line.
func FuzzPCIeSysfs(f *testing.F) {
	for _, s := range []string{"8.0 GT/s PCIe", "2.5 GT/s PCIe", "64.0 GT/s PCIe", "8 GT/s", "Unknown", "Unknown speed", "", "5.0 GT/s x"} {
		f.Add(s, 16, "RxErr 3\nBadTLP 12\nBadDLLP 0\nTOTAL_ERR_COR 15\n")
	}
	f.Add("16.0 GT/s PCIe", 8, "Undefined 0\nCmpltTO 2\nTOTAL_ERR_NONFATAL 2\n")
	f.Add("32.0 GT/s PCIe", -1, "BadTLP 18446744073709551615\nTOTAL_ERR_COR 1\nRxErr\n")
	f.Fuzz(func(t *testing.T, speed string, lanes int, aer string) {
		if v, ok := ParseLinkSpeed(speed); ok && (v < 0 || math.IsNaN(v) || math.IsInf(v, 0)) {
			t.Fatalf("ParseLinkSpeed(%q) = %v", speed, v)
		} else if ok {
			if bw := LinkBandwidth(v, lanes); bw < 0 || math.IsNaN(bw) || math.IsInf(bw, 0) {
				t.Fatalf("LinkBandwidth(%v, %d) = %v", v, lanes, bw)
			}
		}
		counts, _ := ParseAER([]byte(aer), "correctable")
		for _, c := range counts {
			if c.Name == "" || strings.ContainsAny(c.Name, " \t\n") || strings.HasPrefix(c.Name, "TOTAL_") {
				t.Fatalf("ParseAER(%q) gave the name %q", aer, c.Name)
			}
		}
	})
}
