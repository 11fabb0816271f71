// Package labelvalue makes kernel and driver strings usable as Prometheus
// label values.
package labelvalue

import (
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"
)

// EscapeAll escapes every value as Escape does. Interface names may hold
// any bytes but '/', ':' and white space, and driver strings (a firmware
// version read from the NIC's flash) are bytes the driver fills as it
// likes; a value that is not UTF-8 makes the client library panic. The
// common case, all valid, allocates nothing.
func EscapeAll(values []string) []string {
	for i, v := range values {
		if !utf8.ValidString(v) {
			out := slices.Clone(values)
			for j := i; j < len(out); j++ {
				out[j] = Escape(out[j])
			}
			return out
		}
	}
	return values
}

// Escape writes each byte that is not UTF-8 as \xNN: unlike one
// replacement character for all of them, two names that differ only in
// such bytes keep two label values, and the operator can tell which
// device it is.
func Escape(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			fmt.Fprintf(&b, "\\x%02x", s[i])
		} else {
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}
