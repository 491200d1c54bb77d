package logging

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

var update = flag.Bool("update", false, "rewrite golden files")

// fixedClock is 2026-11-30T13:38:23.853425999Z: the golden output must show .853425 (truncated,
// not rounded).
func fixedClock() time.Time {
	return time.Date(2026, 11, 30, 13, 38, 23, 853425999, time.UTC)
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read golden (run with -update to create): %v", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s\n got:\n%s\nwant:\n%s", path, got, want)
	}
}

const (
	clusterRef = "ValkeyCluster.v1alpha1.valkey.gomomento.com/my-cluster.my-app"
	podRef     = "Pod.v1./my-cluster-8c04d.my-app"
)

func TestEncoderGolden(t *testing.T) {
	var stdout, stderr bytes.Buffer
	base := New(&stdout, &stderr, "trace", fixedClock)

	// A heartbeat outside any reconcile: no span keys.
	Target(base, TargetACL).Info(MsgACLTick, ClusterName("my-cluster"))

	// Events inside a reconcile, one per reason.
	cluster := Target(base, TargetCluster)
	for _, reason := range []string{
		ReasonObjectUpdated,
		RelatedObjectUpdated(podRef),
		ReasonReconcilerRetry,
		ReasonErrorPolicyRetry,
	} {
		InSpan(cluster, Span{Ref: clusterRef, Reason: reason}).Info(MsgActiveTick,
			ClusterName("my-cluster"), zap.Int("shards", 3), zap.Int("nodes", 6))
	}
	inSpan := InSpan(cluster, Span{Ref: clusterRef, Reason: ReasonErrorPolicyRetry})
	inSpan.Warn(MsgReconcileError, ClusterName("my-cluster"), Err(errors.New(`get pod "a": connection refused`)))
	Target(InSpan(base, Span{Ref: clusterRef, Reason: ReasonObjectUpdated}), TargetFSM).
		Info(TransitioningTo("Active"), ClusterName("my-cluster"))

	// A cluster-scoped object: no namespace in the reference.
	InSpan(Target(base, "operator::controller::config"), Span{
		Ref:    "ValkeyConfig.v1alpha1.valkey.gomomento.com/small",
		Reason: ReasonObjectUpdated,
	}).Debug("config resolved", zap.String("config", "small"))

	// String escaping in the message, a field value and a field name, the way serde_json does.
	nasty := "quote\" backslash\\ nul\x00 soh\x01 us\x1f bs\b ff\f nl\n cr\r tab\t del\x7f é 日本 — \u2028 <a href=\"x\">&amp;</a> bad\xff"
	Target(base, TargetCluster).Info(nasty, zap.String("reason", nasty), zap.String("k\"ey\n", "v"))
	Target(base, TargetTLS).Info(MsgTLSValidationFailed, ClusterName("my-cluster"),
		zap.String(FieldReason, "certificate does not cover *.my-cluster.my-app.svc.cluster.local"))
	Target(base, TargetCluster).Info(MsgNoQuorumTakeover, ClusterName("my-cluster"), Pod("my-cluster-8c04d"))

	// Value types: numbers stay numbers, booleans booleans, the rest strings.
	Target(base, TargetCluster).Debug("types",
		zap.Int64("neg", -42), zap.Uint64("max", math.MaxUint64), zap.Bool("ok", true), zap.Bool("no", false),
		zap.Float64("half", 0.5), zap.Float64("whole", 3), zap.Float64("big", 1e21), zap.Float64("tiny", 1.5e-7),
		zap.Float64("nan", math.NaN()), zap.Duration("every", 30*time.Second), zap.Stringer("ref", stringer("x")),
		zap.Strings("list", []string{"a", "b"}))
	Target(base, TargetCluster).Log(TraceLevel, "trace level", ClusterName("my-cluster"))
	Target(base, TargetOperator).Error(MsgInvalidConfig, zap.String(FieldKey, "defaultZoneSpread"),
		zap.String(FieldValue, "sometimes"), Err(errors.New("expected bestEffort or required")))

	if stderr.Len() != 0 {
		t.Errorf("unexpected stderr: %q", stderr.String())
	}
	golden(t, "encoder.golden", stdout.Bytes())

	// Every line is one JSON object with exactly the contract's keys, in order.
	for _, line := range strings.Split(strings.TrimSuffix(stdout.String(), "\n"), "\n") {
		keys := topLevelKeys(t, line)
		want := "timestamp,level,fields,target"
		if strings.Contains(line, `"spans":`) {
			want += ",span,spans"
		}
		if got := strings.Join(keys, ","); got != want {
			t.Errorf("keys %s, want %s in %s", got, want, line)
		}
	}
}

type stringer string

func (s stringer) String() string { return string(s) }

func topLevelKeys(t *testing.T, line string) []string {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not an object: %s", line)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("bad JSON %v: %s", err, line)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("bad JSON %v: %s", err, line)
		}
	}
	return keys
}

func TestFormatFloat(t *testing.T) {
	for _, tc := range []struct {
		in   float64
		want string
	}{
		{0, "0.0"}, {math.Copysign(0, -1), "-0.0"}, {1, "1.0"}, {-2.5, "-2.5"}, {0.1, "0.1"},
		{123456789, "123456789.0"}, {1e15, "1000000000000000.0"}, {1e16, "1e16"}, {1.5e16, "1.5e16"},
		{1e21, "1e21"}, {0.0001, "0.0001"}, {0.00001, "0.00001"}, {0.000001, "1e-6"}, {1.5e-7, "1.5e-7"},
		{math.Inf(1), "null"}, {math.NaN(), "null"},
	} {
		if got := formatFloat(tc.in); got != tc.want {
			t.Errorf("formatFloat(%v) = %s, want %s", tc.in, got, tc.want)
		}
	}
}

type verboseErr struct{}

func (verboseErr) Error() string { return "short" }

func (verboseErr) Format(s fmt.State, _ rune) { _, _ = fmt.Fprint(s, "long\nwith stack") }

// Errors are their message only, in context fields too: no errorVerbose key.
func TestErrorFieldsMessageOnly(t *testing.T) {
	var out bytes.Buffer
	l := New(&out, nil, "info", fixedClock)
	l.With(zap.Error(verboseErr{})).Info("ctx")
	l.Info("call", zap.Error(verboseErr{}))
	want := `{"timestamp":"2026-11-30T13:38:23.853425Z","level":"INFO","fields":{"message":"ctx","error":"short"},"target":"operator"}` + "\n" +
		`{"timestamp":"2026-11-30T13:38:23.853425Z","level":"INFO","fields":{"message":"call","error":"short"},"target":"operator"}` + "\n"
	if out.String() != want {
		t.Errorf("got\n%s\nwant\n%s", out.String(), want)
	}
}
