package valkey

import "strings"

// ParseInfo parses the "key:value" lines of INFO and CLUSTER INFO into a
// map. Section headers ("# Replication"), blank lines and lines without a
// colon are skipped; a value keeps any further colons, as in
// "master_host:::1". Keys are Valkey's own (role:master,
// master_link_status:up); callers translate the words they act on.
func ParseInfo(text string) map[string]string {
	out := make(map[string]string)
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' {
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok || k == "" {
			continue
		}
		out[k] = v
	}
	return out
}
