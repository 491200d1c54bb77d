package logging

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

// The strings of the contract, verbatim, with the levels it states or implies.
func TestCatalogueMatchesContract(t *testing.T) {
	contract := map[string]zapcore.Level{
		"creating Pod for node":                                           zapcore.InfoLevel,
		"creating headless Service":                                       zapcore.InfoLevel,
		"cluster meet issued":                                             zapcore.InfoLevel,
		"failover to up-to-date replica for rolling upgrade":              zapcore.InfoLevel,
		"cluster formed, transitioning to Active":                         zapcore.InfoLevel,
		"transitioning to Active":                                         zapcore.InfoLevel,
		"active tick":                                                     zapcore.InfoLevel,
		"ACL reconcile tick":                                              zapcore.InfoLevel,
		"TLS reconcile tick":                                              zapcore.InfoLevel,
		"bootstrap blocked: pod cannot be scheduled":                      zapcore.InfoLevel,
		"primary unhealthy but replicas exist, waiting for auto-failover": zapcore.InfoLevel,
		"no quorum — issued TAKEOVER on replica":                          zapcore.InfoLevel,
		"TLS Secret validation failed, setting cluster Invalid":           zapcore.InfoLevel,
		"ACL LOAD failed, will retry next tick":                           zapcore.WarnLevel,
		"reconcile error, requeuing":                                      zapcore.WarnLevel,
		// Not in the contract; quoted by the original's docs (operations/failure-modes.md).
		"completed join": zapcore.InfoLevel,
	}
	seen := map[string]bool{}
	for _, e := range Catalogue {
		if seen[e.Message] {
			t.Errorf("duplicate catalogue entry %q", e.Message)
		}
		seen[e.Message] = true
		if want, ok := contract[e.Message]; ok && e.Level != want {
			t.Errorf("%q at %s, want %s", e.Message, e.Level, want)
		}
		if e.Level == zapcore.ErrorLevel && e.Message != MsgInvalidConfig && e.Message != MsgReconcilePanicked && e.Message != MsgNodeStepPanicked {
			t.Errorf("%q at ERROR: ERROR is for invalid startup configuration and broken invariants only", e.Message)
		}
		if e.Target != "" && e.Target != TargetOperator && !strings.HasPrefix(e.Target, "operator::") {
			t.Errorf("%q has target %q outside the operator crate", e.Message, e.Target)
		}
		if strings.Contains(e.Message, "password") {
			t.Errorf("%q mentions a password", e.Message)
		}
	}
	for msg := range contract {
		if !seen[msg] {
			t.Errorf("contract message %q missing from the catalogue", msg)
		}
	}
	if !strings.Contains(MsgNoQuorumTakeover, "\u2014") {
		t.Error("the no-quorum message must use an em dash")
	}
}

func TestStartupHelpers(t *testing.T) {
	var stderr bytes.Buffer
	if code := ClientBuildFailed(&stderr, errors.New("no KUBERNETES_SERVICE_HOST")); code != 101 {
		t.Errorf("exit code %d", code)
	}
	if got := stderr.String(); got != "failed to create Kubernetes client: no KUBERNETES_SERVICE_HOST\n" || strings.Contains(got, "{") {
		t.Errorf("stderr %q", got)
	}

	var out bytes.Buffer
	InvalidConfig(New(&out, nil, "", fixedClock), "defaultZoneSpread", "sometimes", errors.New(`expected "bestEffort" or "required"`))
	want := `{"timestamp":"2026-11-30T13:38:23.853425Z","level":"ERROR","fields":{"message":"invalid operator configuration","key":"defaultZoneSpread","value":"sometimes","error":"expected \"bestEffort\" or \"required\""},"target":"operator"}` + "\n"
	if out.String() != want {
		t.Errorf("got  %s\nwant %s", out.String(), want)
	}
}
