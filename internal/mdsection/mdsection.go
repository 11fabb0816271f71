// Package mdsection replaces the generated section of a Markdown page:
// the text between a begin and an end marker (HTML comments the page
// keeps), which make generate rewrites and a test compares, as METRICS.md
// is whole.
package mdsection

import (
	"fmt"
	"strings"
)

// Replace returns doc with body in place of what stands between the
// first begin marker and the end marker after it; the markers stay.
func Replace(doc, begin, end, body string) (string, error) {
	i := strings.Index(doc, begin)
	if i < 0 {
		return "", missing(begin, end)
	}
	i += len(begin)
	j := strings.Index(doc[i:], end)
	if j < 0 {
		return "", missing(begin, end)
	}
	return doc[:i] + body + doc[i+j:], nil
}

func missing(begin, end string) error {
	return fmt.Errorf("no %q ... %q section", strings.TrimSpace(begin), strings.TrimSpace(end))
}
