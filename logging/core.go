package logging

import (
	"context"
	"io"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// Span is the reconcile span kube-runtime opens around every reconcile: the reference of the
// object reconciled (see ObjectRef) and why the reconcile ran (see the Reason constants).
type Span struct {
	Ref    string
	Reason string
}

// Marker fields carry the target and the span through zap's API. They are SkipType fields, so
// a core other than ours ignores them instead of printing them.
const (
	targetKey  = "\x00logging.target"
	spanKey    = "\x00logging.span"
	libraryKey = "\x00logging.library"
)

func targetOf(f zapcore.Field) (string, bool) {
	if f.Type == zapcore.SkipType && f.Key == targetKey {
		return f.String, true
	}
	return "", false
}

func spanOf(f zapcore.Field) (*Span, bool) {
	if f.Type == zapcore.SkipType && f.Key == spanKey {
		s, ok := f.Interface.(*Span)
		return s, ok
	}
	return nil, false
}

func isLibraryMarker(f zapcore.Field) bool {
	return f.Type == zapcore.SkipType && f.Key == libraryKey
}

// TargetField is a field that sets the target of the events it is attached to.
func TargetField(target string) zap.Field {
	return zap.Field{Key: targetKey, Type: zapcore.SkipType, String: target}
}

// SpanField is a field that puts the events it is attached to inside the reconcile span.
func SpanField(s Span) zap.Field {
	return zap.Field{Key: spanKey, Type: zapcore.SkipType, Interface: &s}
}

// Target returns a logger whose events carry target t, a `::` module path such as
// TargetCluster. zap's Named is not used for targets: it joins names with dots.
func Target(l *zap.Logger, t string) *zap.Logger { return l.With(TargetField(t)) }

// InSpan returns a logger whose events are inside the reconcile span s, so they carry "span"
// and "spans" at every verbosity.
func InSpan(l *zap.Logger, s Span) *zap.Logger { return l.With(SpanField(s)) }

// filterCore applies the RUST_LOG filter by target, level and span, and hands accepted events
// to the encoding core with the target in Entry.LoggerName and the span as a marker field.
type filterCore struct {
	inner   zapcore.Core
	filter  *Filter
	target  string
	span    *Span
	library bool
}

// NewCore returns a zapcore.Core that filters with f and writes tracing-style JSON lines to
// out. Nothing is sampled and no caller or stack is ever written.
func NewCore(out io.Writer, f *Filter) zapcore.Core {
	all := zap.LevelEnablerFunc(func(zapcore.Level) bool { return true })
	return &filterCore{
		inner:  zapcore.NewCore(NewEncoder(), zapcore.Lock(zapcore.AddSync(out)), all),
		filter: f,
		target: DefaultTarget,
	}
}

func (c *filterCore) Enabled(l zapcore.Level) bool { return c.filter.MaxLevel().allows(l) }

func (c *filterCore) With(fields []zapcore.Field) zapcore.Core {
	clone := *c
	rest := make([]zapcore.Field, 0, len(fields))
	for _, f := range fields {
		if t, ok := targetOf(f); ok {
			clone.target = t
		} else if s, ok := spanOf(f); ok {
			clone.span = s
		} else if isLibraryMarker(f) {
			clone.library = true
		} else if err, ok := f.Interface.(error); ok && f.Type == zapcore.ErrorType {
			// Only the message: zap would add errorVerbose/errorCauses keys.
			rest = append(rest, zap.String(f.Key, errorText(err)))
		} else {
			rest = append(rest, f)
		}
	}
	if len(rest) > 0 {
		clone.inner = c.inner.With(rest)
	}
	return &clone
}

func (c *filterCore) Check(ent zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	v := verbosity(ent.Level)
	if c.filter.needsFields {
		// Directives that name fields can only be decided in Write, with the fields at hand.
		if c.filter.MaxLevel() >= v {
			return ce.AddCore(ent, c)
		}
		return ce
	}
	if c.filter.Enabled(c.target, v, c.span, c.library, nil) {
		return ce.AddCore(ent, c)
	}
	return ce
}

func (c *filterCore) Write(ent zapcore.Entry, fields []zapcore.Field) error {
	target, span := c.target, c.span
	for _, f := range fields {
		if t, ok := targetOf(f); ok {
			target = t
		} else if s, ok := spanOf(f); ok {
			span = s
		}
	}
	if c.filter.needsFields {
		names := map[string]bool{"message": true}
		for _, f := range fields {
			names[f.Key] = true
		}
		if !c.filter.Enabled(target, verbosity(ent.Level), span, c.library, func(n string) bool { return names[n] }) {
			return nil
		}
	}
	ent.LoggerName = target
	ent.Caller = zapcore.EntryCaller{}
	ent.Stack = ""
	if span != nil {
		fields = append(fields[:len(fields):len(fields)], SpanField(*span))
	}
	return c.inner.Write(ent, fields)
}

func (c *filterCore) Sync() error { return c.inner.Sync() }

// New builds the operator's logger. rustLog is the value of RUST_LOG, read once by the caller
// at startup; each invalid piece is reported on stderr (see ParseFilter) before any JSON is
// written to stdout. clock supplies event times (nil means time.Now); tests pass a fixed one.
// The logger has no caller, stacktrace or sampling options, and its default target is
// DefaultTarget.
func New(stdout, stderr io.Writer, rustLog string, clock func() time.Time) *zap.Logger {
	if stderr == nil {
		stderr = io.Discard
	}
	f := ParseFilter(rustLog, stderr)
	opts := []zap.Option{zap.ErrorOutput(zapcore.AddSync(stderr))}
	if clock != nil {
		opts = append(opts, zap.WithClock(funcClock(clock)))
	}
	return zap.New(NewCore(stdout, f), opts...)
}

type funcClock func() time.Time

func (c funcClock) Now() time.Time { return c() }

func (c funcClock) NewTicker(d time.Duration) *time.Ticker { return time.NewTicker(d) }

type ctxKey struct{}

// IntoContext stores a logger (typically one made with InSpan) in ctx.
func IntoContext(ctx context.Context, l *zap.Logger) context.Context {
	return context.WithValue(ctx, ctxKey{}, l)
}

// FromContext returns the logger stored by IntoContext, or zap's global logger (zap.L(), which
// main replaces with New's logger) when there is none. It never returns controller-runtime's
// context logger, so controller-runtime's context keys (controller, reconcileID, …) never
// reach our events.
func FromContext(ctx context.Context) *zap.Logger {
	if l, ok := ctx.Value(ctxKey{}).(*zap.Logger); ok {
		return l
	}
	return zap.L()
}
