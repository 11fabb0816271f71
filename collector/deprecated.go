package collector

import "strings"

// renamedCollectors are the collectors that 1.0 renamed, old name to new,
// so that every family starts with the name of the collector that sends it
// (docs/dev/metrics-design.md). Their old flags still parse until 1.1.
var renamedCollectors = map[string]string{"xdp": "monitor", "ethtool": "nic"}

// RenameDeprecatedFlags returns args with every flag of a renamed
// collector (--[no-]collector.OLD, --[no-]collector.OLD.FLAG, with or
// without =VALUE) spelled with the collector's new name, and the old
// spellings it found, for a warning. Arguments after "--" are left alone.
func RenameDeprecatedFlags(args []string) (out, deprecated []string) {
	out = make([]string, len(args))
	copy(out, args)
	for i, arg := range out {
		if arg == "--" {
			break
		}
		if renamed, ok := renameFlag(arg); ok {
			deprecated = append(deprecated, strings.SplitN(arg, "=", 2)[0])
			out[i] = renamed
		}
	}
	return out, deprecated
}

// renameFlag spells one argument with its collector's new name.
func renameFlag(arg string) (string, bool) {
	for _, prefix := range []string{"--collector.", "--no-collector."} {
		rest, ok := strings.CutPrefix(arg, prefix)
		if !ok {
			continue
		}
		end := strings.IndexAny(rest, ".=")
		if end < 0 {
			end = len(rest)
		}
		if to, ok := renamedCollectors[rest[:end]]; ok {
			return prefix + to + rest[end:], true
		}
	}
	return "", false
}
