package harness

import (
	"strings"
	"testing"
	"time"
)

// CheckNoRefusal fails for every slot that refused a write, except the one connection close
// that Valkey 8.0.1 makes at the instant a primary is demoted (see primaryLostUnderLoad): a
// write failed with EOF and the next one succeeded within a second, counted apart.
func CheckNoRefusal(t *testing.T, r Report) {
	t.Helper()
	eof := 0
	for _, s := range r.Slots {
		if s.Failures == 0 {
			continue
		}
		if strings.Contains(s.LastError, "EOF") && s.LongestRefusal < time.Second {
			eof += s.Failures
			t.Logf("slot %d: %d writes failed with EOF within %s as the old primary was demoted (connection closed by Valkey, counted apart)",
				s.Slot, s.Failures, s.LongestRefusal.Round(time.Millisecond))
			continue
		}
		if LatencyOnly(s) {
			t.Logf("slot %d: %d writes got no reply within 1 s each, for up to %s (latency, not a refusal)",
				s.Slot, s.Failures, s.LongestRefusal.Round(time.Millisecond))
			continue
		}
		t.Errorf("slot %d refused %d writes for up to %s (last error: %s)", s.Slot, s.Failures, s.LongestRefusal.Round(time.Millisecond), s.LastError)
	}
	t.Logf("writes failed with EOF at the demotion: %d", eof)
}
