package logging

import "go.uber.org/zap/zapcore"

// TraceLevel is the zap level used for tracing's TRACE. zap stops at DEBUG, so TRACE sits one
// step below it; the encoder prints it as "TRACE" and the filter ranks it above DEBUG in
// verbosity, exactly as tracing does.
const TraceLevel = zapcore.DebugLevel - 1

// LevelFilter is a verbosity ceiling in tracing's order: Off < Error < Warn < Info < Debug <
// Trace. An event passes a filter when the filter is at least as verbose as the event.
type LevelFilter int8

// The six filters of tracing's LevelFilter. Their numeric values are the numbers EnvFilter
// accepts in a directive (`RUST_LOG=3` means info).
const (
	FilterOff LevelFilter = iota
	FilterError
	FilterWarn
	FilterInfo
	FilterDebug
	FilterTrace
)

// String returns the lower-case name EnvFilter uses for the filter.
func (f LevelFilter) String() string {
	switch f {
	case FilterOff:
		return "off"
	case FilterError:
		return "error"
	case FilterWarn:
		return "warn"
	case FilterInfo:
		return "info"
	case FilterDebug:
		return "debug"
	default:
		return "trace"
	}
}

// verbosity ranks a zap level the way tracing ranks its levels: every zap level from ERROR up
// (DPANIC, PANIC, FATAL have no tracing counterpart) counts as ERROR.
func verbosity(l zapcore.Level) LevelFilter {
	switch {
	case l >= zapcore.ErrorLevel:
		return FilterError
	case l == zapcore.WarnLevel:
		return FilterWarn
	case l == zapcore.InfoLevel:
		return FilterInfo
	case l == zapcore.DebugLevel:
		return FilterDebug
	default:
		return FilterTrace
	}
}

// levelName is the upper-case name tracing's JSON formatter writes in "level".
func levelName(l zapcore.Level) string {
	switch verbosity(l) {
	case FilterError:
		return "ERROR"
	case FilterWarn:
		return "WARN"
	case FilterInfo:
		return "INFO"
	case FilterDebug:
		return "DEBUG"
	default:
		return "TRACE"
	}
}

// allows reports whether an event at level l passes the ceiling f.
func (f LevelFilter) allows(l zapcore.Level) bool {
	return f >= verbosity(l)
}
