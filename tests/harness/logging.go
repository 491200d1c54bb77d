package harness

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"
)

var (
	timestampRE = regexp.MustCompile(`^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$`)
	targetRE    = regexp.MustCompile(`^[a-z][a-z0-9_]*(::[a-z][a-z0-9_]*)*$`)
	levels      = map[string]bool{"ERROR": true, "WARN": true, "INFO": true, "DEBUG": true, "TRACE": true}
)

// LogLine is one decoded line with its top-level keys in the order printed.
type LogLine struct {
	Raw       string
	keys      []string
	Timestamp string         `json:"timestamp"`
	Level     string         `json:"level"`
	Target    string         `json:"target"`
	Fields    map[string]any `json:"fields"`
	Span      map[string]any `json:"span"`
	Spans     []any          `json:"spans"`
	fields    []string       // keys of fields, in order
}

// orderedKeys returns the keys of the JSON object in raw, in order.
func orderedKeys(raw []byte) ([]string, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("not an object")
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		keys = append(keys, t.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			return nil, err
		}
	}
	return keys, nil
}

// ParseLog decodes every line of a log stream and checks the contract's shape: one JSON
// object per line, keys timestamp, level, fields, target (then span, spans inside a
// reconcile, and nothing else), the timestamp's exact form, level names, `::` targets,
// `message` first in fields, and span / spans together with spans == [span].
func ParseLog(t testing.TB, data []byte) []LogLine {
	t.Helper()
	var out []LogLine
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		raw := sc.Bytes()
		var l LogLine
		if err := json.Unmarshal(raw, &l); err != nil {
			t.Fatalf("line %d is not a JSON object: %v\n%s", n, err, raw)
		}
		l.Raw = string(raw)
		var err error
		if l.keys, err = orderedKeys(raw); err != nil {
			t.Fatalf("line %d: %v", n, err)
		}
		var top struct {
			Timestamp string            `json:"timestamp"`
			Fields    json.RawMessage   `json:"fields"`
			Span      json.RawMessage   `json:"span"`
			Spans     []json.RawMessage `json:"spans"`
		}
		_ = json.Unmarshal(raw, &top)
		if l.fields, err = orderedKeys(top.Fields); err != nil {
			t.Fatalf("line %d: fields: %v\n%s", n, err, raw)
		}
		keys := strings.Join(l.keys, ",")
		switch keys {
		case "timestamp,level,fields,target":
			if l.Span != nil || l.Spans != nil {
				t.Fatalf("line %d: span without its keys", n)
			}
		case "timestamp,level,fields,target,span,spans":
			spanKeys, _ := orderedKeys(top.Span)
			if strings.Join(spanKeys, ",") != "object.reason,object.ref,name" || l.Span["name"] != "reconciling object" {
				t.Fatalf("line %d: span keys %v: %s", n, spanKeys, raw)
			}
			if len(top.Spans) != 1 || string(top.Spans[0]) != string(top.Span) {
				t.Fatalf("line %d: spans is not [span]: %s", n, raw)
			}
		default:
			t.Fatalf("line %d: top-level keys %s\n%s", n, keys, raw)
		}
		if !timestampRE.MatchString(top.Timestamp) {
			t.Fatalf("line %d: timestamp %q", n, top.Timestamp)
		}
		if !levels[l.Level] {
			t.Fatalf("line %d: level %q", n, l.Level)
		}
		if !targetRE.MatchString(l.Target) {
			t.Fatalf("line %d: target %q", n, l.Target)
		}
		if len(l.fields) == 0 || l.fields[0] != "message" {
			t.Fatalf("line %d: fields do not start with message: %s", n, raw)
		}
		for _, leaked := range []string{"controller", "controllerGroup", "controllerKind", "reconcileID", "namespace"} {
			if _, ok := l.Fields[leaked]; ok {
				t.Fatalf("line %d: controller-runtime's %q leaked into fields: %s", n, leaked, raw)
			}
		}
		out = append(out, l)
	}
	return out
}

func (l LogLine) Message() string { s, _ := l.Fields["message"].(string); return s }

func (l LogLine) Ref() string { s, _ := l.Span["object.ref"].(string); return s }
