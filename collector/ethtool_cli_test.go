package collector

import (
	"bufio"
	"bytes"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// ethtoolS runs the ethtool(8) command, `ethtool -S dev`, inside the named
// network namespace when netns is not empty, and returns its statistics
// by name: an oracle for the kernel's counters that shares no code with
// the collector (the exporter's own ioctls) or its libraries.
func ethtoolS(t testing.TB, netns, dev string) map[string]uint64 {
	t.Helper()
	args := []string{"ethtool", "-S", dev}
	if netns != "" {
		args = append([]string{"ip", "netns", "exec", netns}, args...)
	}
	out, err := exec.Command(args[0], args[1:]...).Output()
	if err != nil {
		t.Fatalf("%s: %v", strings.Join(args, " "), err)
	}
	stats := map[string]uint64{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		name, val, ok := strings.Cut(strings.TrimSpace(sc.Text()), ": ")
		if !ok {
			continue // the "NIC statistics:" header
		}
		v, err := strconv.ParseUint(val, 10, 64)
		if err != nil {
			t.Fatalf("%s: stat %q: %v", strings.Join(args, " "), name, err)
		}
		stats[name] = v
	}
	if len(stats) == 0 {
		t.Fatalf("%s printed no statistics:\n%s", strings.Join(args, " "), out)
	}
	return stats
}
