package logging

import (
	"fmt"
	"strings"
	"unicode"

	"github.com/go-logr/logr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// controller-runtime and client-go log through logr (client-go through klog). Their output is
// routed through this package's core so that nothing ever prints in another format:
//
//   - Target: the root (TargetControllerRuntime or TargetKubeClient) plus the logr names as
//     `::` segments in snake_case: controller-runtime's "controller-runtime.cache" logger
//     becomes controller_runtime::cache, "eventhandler.enqueueRequestForOwner" becomes
//     controller_runtime::eventhandler::enqueue_request_for_owner.
//   - Levels: logr V(0) is INFO, V(1) DEBUG, V(2) and above TRACE. logr errors are WARN: the
//     libraries retry them (watch failures, lock renewals), and the contract keeps ERROR for
//     invalid configuration at startup and broken invariants.
//   - Filtering: library events are capped at WARN unless a RUST_LOG directive names their
//     target (see Filter.Enabled), so `RUST_LOG=info` shows no controller-runtime chatter.
//   - Context: WithValues is dropped, and so are the keys controller-runtime uses for context
//     (controller, controllerGroup, controllerKind, reconcileID, name, namespace, the kind of
//     the reconciled object) wherever they appear. Per-call keys stay as event fields.
//   - controller-runtime's "Reconciler error" line is dropped: Tracker.Reconciler logs the
//     catalogue's `reconcile error, requeuing` at WARN, in the span, for the same error.

// reconcilerErrorMsg is the line controller-runtime logs for every failed reconcile.
const reconcilerErrorMsg = "Reconciler error"

var contextKeys = map[string]bool{
	"controller": true, "controllerGroup": true, "controllerKind": true, "reconcileID": true,
	"name": true, "namespace": true, "ValkeyCluster": true, "ValkeyConfig": true,
	"ValkeyImage": true, "ValkeyRole": true,
}

// Logr returns a logr.Logger backed by l's core whose events carry target root (extended by
// logger names) and count as library output for filtering.
func Logr(l *zap.Logger, root string) logr.Logger {
	base := l.With(zap.Field{Key: libraryKey, Type: zapcore.SkipType})
	return logr.New(&sink{base: base, l: Target(base, root), root: root, target: root})
}

// SetupLibraryLogging routes controller-runtime's logger and klog (client-go) through l. Call
// it once at startup, right after New.
func SetupLibraryLogging(l *zap.Logger) {
	ctrllog.SetLogger(Logr(l, TargetControllerRuntime))
	RedirectKlog(l)
}

// RedirectKlog sends all klog output (client-go's informers, leader election, warnings) through
// l under TargetKubeClient, so klog never prints its own format to stderr.
func RedirectKlog(l *zap.Logger) {
	klog.SetLoggerWithOptions(Logr(l, TargetKubeClient), klog.ContextualLogger(true))
}

type sink struct {
	base   *zap.Logger // library-marked, no target
	l      *zap.Logger // base with target
	root   string
	target string
}

var _ logr.LogSink = (*sink)(nil)

func (s *sink) Init(logr.RuntimeInfo) {}

func logrLevel(v int) zapcore.Level {
	switch {
	case v <= 0:
		return zapcore.InfoLevel
	case v == 1:
		return zapcore.DebugLevel
	default:
		return TraceLevel
	}
}

func (s *sink) Enabled(v int) bool { return s.l.Check(logrLevel(v), "") != nil }

func (s *sink) Info(v int, msg string, kv ...interface{}) {
	if ce := s.l.Check(logrLevel(v), strings.TrimSuffix(msg, "\n")); ce != nil {
		ce.Write(kvFields(kv)...)
	}
}

func (s *sink) Error(err error, msg string, kv ...interface{}) {
	if msg == reconcilerErrorMsg && s.root == TargetControllerRuntime {
		return
	}
	if ce := s.l.Check(zapcore.WarnLevel, strings.TrimSuffix(msg, "\n")); ce != nil {
		fields := kvFields(kv)
		if err != nil {
			fields = append(fields, Err(err))
		}
		ce.Write(fields...)
	}
}

// WithValues drops the values: they are controller-runtime's and klog's context, not event
// fields.
func (s *sink) WithValues(...interface{}) logr.LogSink { return s }

func (s *sink) WithName(name string) logr.LogSink {
	target := s.target
	for _, part := range strings.FieldsFunc(name, func(r rune) bool { return r == '.' || r == '/' }) {
		seg := snake(part)
		if seg == "" || (target == s.root && seg == s.root) {
			continue
		}
		target += "::" + seg
	}
	return &sink{base: s.base, l: Target(s.base, target), root: s.root, target: target}
}

// snake turns a logr name into a module-path segment: "controller-runtime" →
// "controller_runtime", "enqueueRequestForOwner" → "enqueue_request_for_owner".
func snake(s string) string {
	var b strings.Builder
	var prev rune
	for _, r := range s {
		switch {
		case unicode.IsUpper(r):
			if prev != 0 && (unicode.IsLower(prev) || unicode.IsDigit(prev)) {
				b.WriteByte('_')
			}
			b.WriteRune(unicode.ToLower(r))
		case unicode.IsLetter(r) || unicode.IsDigit(r):
			b.WriteRune(r)
		default:
			r = '_'
			if prev != '_' && b.Len() > 0 {
				b.WriteRune(r)
			}
		}
		prev = r
	}
	return strings.TrimSuffix(b.String(), "_")
}

// kvFields converts logr key/value pairs, dropping controller-runtime's context keys.
func kvFields(kv []interface{}) []zap.Field {
	fields := make([]zap.Field, 0, len(kv)/2)
	for i := 0; i < len(kv); i += 2 {
		key, ok := kv[i].(string)
		if !ok {
			key = fmt.Sprint(kv[i])
		}
		if contextKeys[key] {
			continue
		}
		if i+1 >= len(kv) {
			fields = append(fields, zap.String(key, "(MISSING)"))
			break
		}
		switch v := kv[i+1].(type) {
		case error:
			fields = append(fields, zap.NamedError(key, v))
		case fmt.Stringer:
			fields = append(fields, zap.Stringer(key, v))
		default:
			fields = append(fields, zap.Any(key, v))
		}
	}
	return fields
}
