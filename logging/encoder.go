package logging

import (
	"encoding/base64"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// Encoder writes tracing-subscriber's JSON format (fmt::format::Json with current span and span
// list on, no file, line or thread keys; checked against tokio-rs/tracing,
// tracing-subscriber/src/fmt/format/json.rs):
//
//	{"timestamp":…,"level":…,"fields":{"message":…,…},"target":…,"span":{…},"spans":[{…}]}
//
// zap's own JSON encoder cannot be configured into this shape: it has no nested "fields"
// object, and its string escaping differs from serde_json's (zap escapes some characters that
// serde_json leaves alone, and prints invalid UTF-8 differently). This encoder escapes exactly
// like serde_json: `"` and `\`, the short escapes \b \f \n \r \t, other control characters
// below 0x20 as \u00XX with lower-case hex; DEL, non-ASCII (including U+2028/U+2029) and
// `<>&` pass through as raw UTF-8. Invalid UTF-8 (impossible in a Rust String) becomes U+FFFD.
//
// Values follow tracing-serde: integers and floats are JSON numbers (floats formatted like
// serde_json's ryu, non-finite floats as null), booleans are booleans, and everything else is a
// string, errors as their Error() text only (zap's errorVerbose/errorCauses keys are never
// written). Caller, stack and logger name are never written; the target comes from the
// Entry's LoggerName, which the filtering core sets (see Target).
type Encoder struct {
	buf            *buffer.Buffer
	openNamespaces int
}

var bufferPool = buffer.NewPool()

// NewEncoder returns an Encoder with no context fields.
func NewEncoder() *Encoder { return &Encoder{buf: bufferPool.Get()} }

var _ zapcore.Encoder = (*Encoder)(nil)

// Clone copies the encoder and the context fields it holds.
func (e *Encoder) Clone() zapcore.Encoder {
	c := &Encoder{buf: bufferPool.Get(), openNamespaces: e.openNamespaces}
	_, _ = c.buf.Write(e.buf.Bytes())
	return c
}

// timestampLayout is tracing-subscriber's default SystemTime format: UTC, six fractional digits
// (Go's layout truncates, as the original does), literal Z.
const timestampLayout = "2006-01-02T15:04:05.000000Z"

// DefaultTarget is the target of events logged through a logger that was never given one: the
// crate root of the original.
const DefaultTarget = "operator"

// EncodeEntry writes one line. A span marker among the fields (see InSpan) becomes the "span"
// and "spans" keys; a target marker overrides ent.LoggerName.
func (e *Encoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	target := ent.LoggerName
	var span *Span
	out := bufferPool.Get()
	out.AppendString(`{"timestamp":"`)
	out.AppendString(ent.Time.UTC().Format(timestampLayout))
	out.AppendString(`","level":"`)
	out.AppendString(levelName(ent.Level))
	out.AppendString(`","fields":{"message":`)
	appendJSONString(out, ent.Message)
	if e.buf.Len() > 0 {
		out.AppendByte(',')
		_, _ = out.Write(e.buf.Bytes())
	}
	call := &Encoder{buf: out}
	for _, f := range fields {
		if t, ok := targetOf(f); ok {
			target = t
			continue
		}
		if s, ok := spanOf(f); ok {
			span = s
			continue
		}
		addField(call, f)
	}
	for i := 0; i < e.openNamespaces+call.openNamespaces; i++ {
		out.AppendByte('}')
	}
	out.AppendString(`},"target":`)
	if target == "" {
		target = DefaultTarget
	}
	appendJSONString(out, target)
	if span != nil {
		out.AppendString(`,"span":`)
		appendSpan(out, span)
		out.AppendString(`,"spans":[`)
		appendSpan(out, span)
		out.AppendByte(']')
	}
	out.AppendString("}\n")
	return out, nil
}

// appendSpan writes the span as tracing's JSON formatter does: its fields sorted by name (they
// pass through a serde_json::Map, a BTreeMap), then "name".
func appendSpan(out *buffer.Buffer, s *Span) {
	out.AppendString(`{"` + spanFieldReason + `":`)
	appendJSONString(out, s.Reason)
	out.AppendString(`,"` + spanFieldRef + `":`)
	appendJSONString(out, s.Ref)
	out.AppendString(`,"name":`)
	appendJSONString(out, SpanName)
	out.AppendByte('}')
}

// addField adds one zap field, writing errors as their message only.
func addField(enc zapcore.ObjectEncoder, f zapcore.Field) {
	if f.Type == zapcore.ErrorType {
		err, _ := f.Interface.(error)
		if err == nil {
			enc.AddString(f.Key, "<nil>")
			return
		}
		enc.AddString(f.Key, errorText(err))
		return
	}
	f.AddTo(enc)
}

// errorText guards against error values whose Error method panics on a nil receiver.
func errorText(err error) (s string) {
	defer func() {
		if r := recover(); r != nil {
			s = "<nil>"
		}
	}()
	return err.Error()
}

func (e *Encoder) sep() {
	if e.buf.Len() == 0 {
		return
	}
	switch e.buf.Bytes()[e.buf.Len()-1] {
	case '{', '[', ':':
		return
	}
	e.buf.AppendByte(',')
}

func (e *Encoder) key(k string) {
	e.sep()
	appendJSONString(e.buf, k)
	e.buf.AppendByte(':')
}

// ObjectEncoder methods.

// AddArray adds a nested JSON array.
func (e *Encoder) AddArray(k string, v zapcore.ArrayMarshaler) error {
	e.key(k)
	return e.AppendArray(v)
}

// AddObject adds a nested JSON object.
func (e *Encoder) AddObject(k string, v zapcore.ObjectMarshaler) error {
	e.key(k)
	return e.AppendObject(v)
}

// AddBinary adds bytes as a base64 string.
func (e *Encoder) AddBinary(k string, v []byte) { e.key(k); e.AppendBinary(v) }

// AddByteString adds UTF-8 bytes as a string.
func (e *Encoder) AddByteString(k string, v []byte) { e.key(k); e.AppendByteString(v) }

// AddBool adds a JSON boolean.
func (e *Encoder) AddBool(k string, v bool) { e.key(k); e.AppendBool(v) }

// AddComplex128 adds a complex number as a string.
func (e *Encoder) AddComplex128(k string, v complex128) { e.key(k); e.AppendComplex128(v) }

// AddComplex64 adds a complex number as a string.
func (e *Encoder) AddComplex64(k string, v complex64) { e.key(k); e.AppendComplex64(v) }

// AddDuration adds a duration as a string such as "30s".
func (e *Encoder) AddDuration(k string, v time.Duration) { e.key(k); e.AppendDuration(v) }

// AddFloat64 adds a JSON number (null when not finite, as serde_json does).
func (e *Encoder) AddFloat64(k string, v float64) { e.key(k); e.AppendFloat64(v) }

// AddFloat32 adds a JSON number; tracing records every float as f64.
func (e *Encoder) AddFloat32(k string, v float32) { e.key(k); e.AppendFloat32(v) }

// AddInt adds a JSON number.
func (e *Encoder) AddInt(k string, v int) { e.AddInt64(k, int64(v)) }

// AddInt64 adds a JSON number.
func (e *Encoder) AddInt64(k string, v int64) { e.key(k); e.AppendInt64(v) }

// AddInt32 adds a JSON number.
func (e *Encoder) AddInt32(k string, v int32) { e.AddInt64(k, int64(v)) }

// AddInt16 adds a JSON number.
func (e *Encoder) AddInt16(k string, v int16) { e.AddInt64(k, int64(v)) }

// AddInt8 adds a JSON number.
func (e *Encoder) AddInt8(k string, v int8) { e.AddInt64(k, int64(v)) }

// AddString adds a JSON string.
func (e *Encoder) AddString(k, v string) { e.key(k); e.AppendString(v) }

// AddTime adds a time as an RFC 3339 string.
func (e *Encoder) AddTime(k string, v time.Time) { e.key(k); e.AppendTime(v) }

// AddUint adds a JSON number.
func (e *Encoder) AddUint(k string, v uint) { e.AddUint64(k, uint64(v)) }

// AddUint64 adds a JSON number.
func (e *Encoder) AddUint64(k string, v uint64) { e.key(k); e.AppendUint64(v) }

// AddUint32 adds a JSON number.
func (e *Encoder) AddUint32(k string, v uint32) { e.AddUint64(k, uint64(v)) }

// AddUint16 adds a JSON number.
func (e *Encoder) AddUint16(k string, v uint16) { e.AddUint64(k, uint64(v)) }

// AddUint8 adds a JSON number.
func (e *Encoder) AddUint8(k string, v uint8) { e.AddUint64(k, uint64(v)) }

// AddUintptr adds a JSON number.
func (e *Encoder) AddUintptr(k string, v uintptr) { e.AddUint64(k, uint64(v)) }

// AddReflected adds any other value as its fmt %v text, as tracing records Debug values as
// strings.
func (e *Encoder) AddReflected(k string, v interface{}) error {
	e.key(k)
	return e.AppendReflected(v)
}

// OpenNamespace nests the following fields in an object named k.
func (e *Encoder) OpenNamespace(k string) {
	e.key(k)
	e.buf.AppendByte('{')
	e.openNamespaces++
}

// ArrayEncoder methods.

// AppendArray appends a nested array.
func (e *Encoder) AppendArray(v zapcore.ArrayMarshaler) error {
	e.sep()
	e.buf.AppendByte('[')
	err := v.MarshalLogArray(e)
	e.buf.AppendByte(']')
	return err
}

// AppendObject appends a nested object.
func (e *Encoder) AppendObject(v zapcore.ObjectMarshaler) error {
	e.sep()
	e.buf.AppendByte('{')
	saved := e.openNamespaces
	e.openNamespaces = 0
	err := v.MarshalLogObject(e)
	for ; e.openNamespaces > 0; e.openNamespaces-- {
		e.buf.AppendByte('}')
	}
	e.openNamespaces = saved
	e.buf.AppendByte('}')
	return err
}

// AppendBinary appends bytes as base64.
func (e *Encoder) AppendBinary(v []byte) { e.AppendString(base64.StdEncoding.EncodeToString(v)) }

// AppendByteString appends bytes as a string.
func (e *Encoder) AppendByteString(v []byte) { e.AppendString(string(v)) }

// AppendBool appends a boolean.
func (e *Encoder) AppendBool(v bool) { e.sep(); e.buf.AppendBool(v) }

// AppendComplex128 appends a complex number as a string.
func (e *Encoder) AppendComplex128(v complex128) { e.AppendString(fmt.Sprint(v)) }

// AppendComplex64 appends a complex number as a string.
func (e *Encoder) AppendComplex64(v complex64) { e.AppendString(fmt.Sprint(v)) }

// AppendDuration appends a duration as a string.
func (e *Encoder) AppendDuration(v time.Duration) { e.AppendString(v.String()) }

// AppendFloat64 appends a number formatted like serde_json.
func (e *Encoder) AppendFloat64(v float64) { e.sep(); e.buf.AppendString(formatFloat(v)) }

// AppendFloat32 appends a number; tracing widens f32 to f64.
func (e *Encoder) AppendFloat32(v float32) { e.AppendFloat64(float64(v)) }

// AppendInt appends a number.
func (e *Encoder) AppendInt(v int) { e.AppendInt64(int64(v)) }

// AppendInt64 appends a number.
func (e *Encoder) AppendInt64(v int64) { e.sep(); e.buf.AppendInt(v) }

// AppendInt32 appends a number.
func (e *Encoder) AppendInt32(v int32) { e.AppendInt64(int64(v)) }

// AppendInt16 appends a number.
func (e *Encoder) AppendInt16(v int16) { e.AppendInt64(int64(v)) }

// AppendInt8 appends a number.
func (e *Encoder) AppendInt8(v int8) { e.AppendInt64(int64(v)) }

// AppendString appends a string, capped (Cap): every string value of a field goes through here,
// errors and node replies included.
func (e *Encoder) AppendString(v string) { e.sep(); appendJSONString(e.buf, Cap(v)) }

// AppendTime appends an RFC 3339 time string.
func (e *Encoder) AppendTime(v time.Time) { e.AppendString(v.Format(time.RFC3339Nano)) }

// AppendUint appends a number.
func (e *Encoder) AppendUint(v uint) { e.AppendUint64(uint64(v)) }

// AppendUint64 appends a number.
func (e *Encoder) AppendUint64(v uint64) { e.sep(); e.buf.AppendUint(v) }

// AppendUint32 appends a number.
func (e *Encoder) AppendUint32(v uint32) { e.AppendUint64(uint64(v)) }

// AppendUint16 appends a number.
func (e *Encoder) AppendUint16(v uint16) { e.AppendUint64(uint64(v)) }

// AppendUint8 appends a number.
func (e *Encoder) AppendUint8(v uint8) { e.AppendUint64(uint64(v)) }

// AppendUintptr appends a number.
func (e *Encoder) AppendUintptr(v uintptr) { e.AppendUint64(uint64(v)) }

// AppendReflected appends a value as its %v text.
func (e *Encoder) AppendReflected(v interface{}) error {
	switch x := v.(type) {
	case error:
		e.AppendString(errorText(x))
	case fmt.Stringer:
		e.AppendString(x.String())
	default:
		e.AppendString(fmt.Sprintf("%v", v))
	}
	return nil
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string escaped exactly like serde_json.
func appendJSONString(b *buffer.Buffer, s string) {
	b.AppendByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b.AppendString(s[start:i])
				b.AppendString("\uFFFD")
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b.AppendString(s[start:i])
		switch c {
		case '"':
			b.AppendString(`\"`)
		case '\\':
			b.AppendString(`\\`)
		case '\b':
			b.AppendString(`\b`)
		case '\f':
			b.AppendString(`\f`)
		case '\n':
			b.AppendString(`\n`)
		case '\r':
			b.AppendString(`\r`)
		case '\t':
			b.AppendString(`\t`)
		default:
			b.AppendString(`\u00`)
			b.AppendByte(hexDigits[c>>4])
			b.AppendByte(hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b.AppendString(s[start:])
	b.AppendByte('"')
}

// formatFloat formats like serde_json (ryu): the shortest digits that round-trip, in plain
// notation while the decimal point falls within 16 digits and down to 1e-5, else scientific
// with a bare exponent ("1e21", "1.5e-7"); integral values keep ".0"; NaN and infinities are
// null.
func formatFloat(v float64) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "null"
	}
	if v == 0 {
		if math.Signbit(v) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if v < 0 {
		sign, v = "-", -v
	}
	s := strconv.FormatFloat(v, 'e', -1, 64) // d.ddde±XX
	mant, expStr, _ := strings.Cut(s, "e")
	exp, _ := strconv.Atoi(expStr)
	digits := strings.Replace(mant, ".", "", 1)
	n := len(digits)
	kk := exp + 1 // position of the decimal point
	switch {
	case n <= kk && kk <= 16:
		return sign + digits + strings.Repeat("0", kk-n) + ".0"
	case 0 < kk && kk <= 16:
		return sign + digits[:kk] + "." + digits[kk:]
	case -5 < kk && kk <= 0:
		return sign + "0." + strings.Repeat("0", -kk) + digits
	case n == 1:
		return sign + digits + "e" + strconv.Itoa(kk-1)
	default:
		return sign + digits[:1] + "." + digits[1:] + "e" + strconv.Itoa(kk-1)
	}
}
