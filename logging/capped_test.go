package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"
)

func TestCap(t *testing.T) {
	if s := strings.Repeat("a", MaxText); Cap(s) != s {
		t.Error("a text of MaxText bytes is cut")
	}
	for _, s := range []string{
		strings.Repeat("a", MaxText+1),
		strings.Repeat("é", MaxText), // two bytes a rune: the cut must not split one
		strings.Repeat("x", 64<<20),
	} {
		got := Cap(s)
		kept := got[:strings.LastIndex(got, " … [")]
		if len(got) > MaxText || !utf8.ValidString(got) || !strings.HasPrefix(s, kept) || len(kept) < MaxText-40 {
			t.Errorf("Cap of %d bytes: %d bytes, valid UTF-8 %v", len(s), len(got), utf8.ValidString(got))
		}
		if !strings.HasSuffix(got, " bytes cut]") {
			t.Errorf("Cap of %d bytes does not say it cut: ...%q", len(s), got[len(got)-40:])
		}
	}
}

// A node's error of megabytes (a team's program answering for a node, a reply Valkey echoes)
// reaches the log as at most MaxText bytes in every field: errors, strings, lists of strings.
func TestEncoderCapsEveryTextField(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, nil, "info", fixedClock)
	huge := "ERR " + strings.Repeat("A", 8<<20)
	l.Warn(MsgReconcileError, ClusterName("vc"), Err(errors.New(huge)), zap.String(FieldReason, huge), zap.Strings(FieldHolds, []string{huge}))
	if out.Len() > 4*MaxText {
		t.Fatalf("one line of %d bytes", out.Len())
	}
	var line struct {
		Fields map[string]any `json:"fields"`
	}
	if err := json.Unmarshal(out.Bytes(), &line); err != nil {
		t.Fatalf("%v: %.200s", err, out.String())
	}
	for _, k := range []string{FieldError, FieldReason} {
		if s, _ := line.Fields[k].(string); len(s) > MaxText || !strings.HasPrefix(s, "ERR AAAA") {
			t.Errorf("%s: %d bytes, want at most %d and the reply's beginning", k, len(s), MaxText)
		}
	}
}
