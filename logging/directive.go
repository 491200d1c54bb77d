package logging

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode"
)

// This file reimplements the directive language of tracing-subscriber's EnvFilter (0.3.20 and
// later, whose parser is a small state machine; checked against tokio-rs/tracing,
// tracing-subscriber/src/filter/env/directive.rs and filter/directive.rs). RUST_LOG is a public
// interface of the original operator, so the parser follows EnvFilter's behaviour, quirks
// included, rather than a tidier grammar:
//
//   - A piece is `target[span{field=value,...}]=level`, every part optional. A lone word that is
//     a level name (any case) or a number 0-5 is a global level; any other lone word is a target
//     enabled at TRACE (`RUST_LOG=warning` silently enables a target named "warning").
//   - Targets match by plain string prefix, not on `::` boundaries: `operator::controller`
//     also matches `operator::controllers_extra`. This is what EnvFilter does.
//   - The most specific static directive that matches decides (longest target, then most field
//     names); an equally specific later directive replaces an earlier one (`info,warn` = warn).
//   - Directives naming a span (`[reconciling object]`) or a field value (`[{object.ref=x}]`)
//     are dynamic: they apply to events inside a matching span. The only span this operator
//     opens is the reconcile span (name "reconciling object", target
//     "kube_runtime::controller", fields object.ref and object.reason, as kube-runtime opens
//     it), so `[reconciling object]=debug` or `[{object.ref=.*my-cluster.*}]=trace` turn one
//     reconcile up as they would in the original. Value patterns are regular expressions that
//     must match the whole value; Go's regexp syntax stands in for Rust's regex crate.
//   - The piece is trimmed before it is scanned, but the offsets found in the trimmed text are
//     used to slice the untrimmed text (an EnvFilter quirk): ` info` becomes a target named
//     " info" and silently matches nothing, and ` a=debug` is reported as a bad level.
//
// Invalid pieces are reported on stderr in EnvFilter's words and skipped; see ParseFilter.

// SpanName and SpanTarget describe the reconcile span as kube-runtime opens it. Dynamic
// directives are matched against them.
const (
	SpanName   = "reconciling object"
	SpanTarget = "kube_runtime::controller"
)

// The two span fields, in the (alphabetical) order tracing's JSON formatter prints them.
const (
	spanFieldReason = "object.reason"
	spanFieldRef    = "object.ref"
)

// Error texts, verbatim from tracing-subscriber / tracing-core.
const (
	errInvalidDirective = "invalid filter directive"
	errInvalidLevel     = `error parsing level filter: expected one of "off", "error", "warn", "info", "debug", "trace", or a number 0-5`
	errInvalidField     = "invalid field filter: "
)

// DirectiveError is why one RUST_LOG piece was rejected; Error() is EnvFilter's text.
type DirectiveError struct{ msg string }

// Error returns the message EnvFilter prints after "ignoring `piece`: ".
func (e *DirectiveError) Error() string { return e.msg }

// Directive is one parsed RUST_LOG piece.
type Directive struct {
	// Target is the target prefix; HasTarget is false for a directive that applies to all.
	Target    string
	HasTarget bool
	// Span is the span name; HasSpan is false when the directive names no span.
	Span    string
	HasSpan bool
	// Fields are the `{name=value}` filters.
	Fields []FieldMatch
	// Level is the verbosity the directive enables.
	Level LevelFilter
}

// FieldMatch is one `{name}` or `{name=value}` filter of a dynamic directive.
type FieldMatch struct {
	Name     string
	Value    string
	HasValue bool
	// pattern matches string values; nil when the value parsed as a bool or a number, which
	// never equals the string fields of the reconcile span.
	pattern *regexp.Regexp
}

func (d Directive) isDynamic() bool { return d.HasSpan || len(d.Fields) > 0 }

func (d Directive) isStatic() bool {
	if d.HasSpan {
		return false
	}
	for _, f := range d.Fields {
		if f.HasValue {
			return false
		}
	}
	return true
}

// ParseLevelFilter parses a level the way tracing-core's LevelFilter::from_str does: a number
// 0-5 (Rust's usize syntax, so "+3" and "03" are accepted) or a level name in any case.
func ParseLevelFilter(s string) (LevelFilter, bool) {
	if n, ok := parseRustUsize(s); ok {
		if n <= 5 {
			return LevelFilter(n), true
		}
	}
	switch {
	case s == "":
		return FilterError, true
	case strings.EqualFold(s, "error"):
		return FilterError, true
	case strings.EqualFold(s, "warn"):
		return FilterWarn, true
	case strings.EqualFold(s, "info"):
		return FilterInfo, true
	case strings.EqualFold(s, "debug"):
		return FilterDebug, true
	case strings.EqualFold(s, "trace"):
		return FilterTrace, true
	case strings.EqualFold(s, "off"):
		return FilterOff, true
	}
	return 0, false
}

func parseRustUsize(s string) (uint64, bool) {
	s = strings.TrimPrefix(s, "+")
	if s == "" {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, false
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil
}

// levelOrTrace is the `=level` part: empty means TRACE, anything else must be a level.
func levelOrTrace(s string) (LevelFilter, error) {
	if s == "" {
		return FilterTrace, nil
	}
	l, ok := ParseLevelFilter(s)
	if !ok {
		return 0, &DirectiveError{errInvalidLevel}
	}
	return l, nil
}

func parseFieldMatch(s string) (FieldMatch, error) {
	parts := strings.Split(s, "=")
	m := FieldMatch{Name: parts[0]}
	if len(parts) < 2 {
		return m, nil
	}
	m.Value, m.HasValue = parts[1], true
	v := parts[1]
	if v == "true" || v == "false" {
		return m, nil
	}
	if _, err := strconv.ParseUint(strings.TrimPrefix(v, "+"), 10, 64); err == nil {
		return m, nil
	}
	if _, err := strconv.ParseInt(v, 10, 64); err == nil {
		return m, nil
	}
	if _, err := strconv.ParseFloat(v, 64); err == nil {
		return m, nil
	}
	re, err := regexp.Compile(`^(?:` + v + `)$`)
	if err != nil {
		return m, &DirectiveError{errInvalidField + err.Error()}
	}
	m.pattern = re
	return m, nil
}

// ParseDirective parses one comma-free RUST_LOG piece, following EnvFilter's state machine.
func ParseDirective(from string) (Directive, error) {
	const (
		stStart = iota
		stLevelOrTarget
		stSpan
		stField
		stFields
		stTarget
		stLevel
		stComplete
	)
	cur := Directive{Level: FilterTrace}
	invalid := func() (Directive, error) { return Directive{}, &DirectiveError{errInvalidDirective} }
	// slice mirrors Rust's &from[a..b] with offsets taken from the trimmed text.
	slice := func(a, b int) string {
		if b > len(from) {
			b = len(from)
		}
		if a > b {
			a = b
		}
		return from[a:b]
	}
	state, start := stStart, 0
	trimmed := strings.TrimSpace(from)
	for i, c := range trimmed {
		switch state {
		case stStart:
			switch {
			case c == '[':
				state, start = stSpan, i+1
			case c != '-' && c != ':' && c != '_' && !unicode.IsLetter(c) && !unicode.IsNumber(c):
				return invalid()
			default:
				state, start = stLevelOrTarget, i
			}
		case stLevelOrTarget:
			switch c {
			case '=':
				cur.Target, cur.HasTarget = slice(start, i), true
				state, start = stLevel, i+1
			case '[':
				cur.Target, cur.HasTarget = slice(start, i), true
				state, start = stSpan, i+1
			}
		case stTarget:
			if c != '=' {
				return invalid()
			}
			state, start = stLevel, i+1
		case stSpan:
			switch c {
			case ']':
				cur.Span, cur.HasSpan = slice(start, i), true
				state = stTarget
			case '{':
				if s := slice(start, i); s != "" {
					cur.Span, cur.HasSpan = s, true
				}
				state, start = stField, i+1
			}
		case stField:
			if c == '}' || c == ',' {
				s := slice(start, i)
				if s == "" {
					return invalid()
				}
				m, err := parseFieldMatch(s)
				if err != nil {
					return Directive{}, err
				}
				cur.Fields = append(cur.Fields, m)
				if c == '}' {
					state = stFields
				} else {
					start = i + 1
				}
			}
		case stFields:
			if c != ']' {
				return invalid()
			}
			state = stTarget
		case stLevel:
			// Accumulates up to the end of the piece (commas were split off already).
		default:
			return invalid()
		}
	}
	switch state {
	case stLevelOrTarget:
		rest := slice(start, len(from))
		if rest == "" {
			cur.Level = FilterTrace
		} else if l, ok := ParseLevelFilter(rest); ok {
			cur.Level = l
		} else {
			cur.Target, cur.HasTarget, cur.Level = rest, true, FilterTrace
		}
	case stLevel:
		l, err := levelOrTrace(slice(start, len(from)))
		if err != nil {
			return Directive{}, err
		}
		cur.Level = l
	case stTarget, stComplete:
	default:
		return invalid()
	}
	return cur, nil
}

// staticDirective is the part of a directive that can be decided from the target, level and
// field names of an event alone.
type staticDirective struct {
	target     string
	hasTarget  bool
	fieldNames []string
	level      LevelFilter
}

func (d staticDirective) caresAbout(target string, hasField func(string) bool) bool {
	if d.hasTarget && !strings.HasPrefix(target, d.target) {
		return false
	}
	for _, n := range d.fieldNames {
		if hasField == nil || !hasField(n) {
			return false
		}
	}
	return true
}

// moreSpecificStatic orders like EnvFilter's Ord for StaticDirective, most specific first.
func moreSpecificStatic(a, b staticDirective) int {
	la, lb := -1, -1
	if a.hasTarget {
		la = len(a.target)
	}
	if b.hasTarget {
		lb = len(b.target)
	}
	if la != lb {
		return cmpInt(lb, la)
	}
	if len(a.fieldNames) != len(b.fieldNames) {
		return cmpInt(len(b.fieldNames), len(a.fieldNames))
	}
	if c := strings.Compare(b.target, a.target); c != 0 {
		return c
	}
	return strings.Compare(strings.Join(b.fieldNames, "\x00"), strings.Join(a.fieldNames, "\x00"))
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// Filter is a parsed RUST_LOG: EnvFilter's static and dynamic directive tables.
type Filter struct {
	statics     []staticDirective
	dynamics    []Directive
	maxLevel    LevelFilter
	maxDynamic  LevelFilter
	needsFields bool
	directives  []Directive
}

// ParseFilter parses a RUST_LOG value as EnvFilter's parse_lossy does: split on commas, skip
// empty pieces, and for each invalid piece write exactly one line
// "ignoring `<piece>`: <reason>" to stderr (the piece as written, whitespace included). The
// valid pieces still apply.
//
// Deliberate difference from the original: when no valid directive remains (RUST_LOG unset,
// empty, only commas, or only invalid pieces) the original logs nothing at all; this filter
// falls back to `error`, so a broken operator always says why.
func ParseFilter(spec string, stderr io.Writer) *Filter {
	var dirs []Directive
	for _, piece := range strings.Split(spec, ",") {
		if piece == "" {
			continue
		}
		d, err := ParseDirective(piece)
		if err != nil {
			if stderr != nil {
				_, _ = fmt.Fprintf(stderr, "ignoring `%s`: %s\n", piece, err)
			}
			continue
		}
		dirs = append(dirs, d)
	}
	if len(dirs) == 0 {
		dirs = append(dirs, Directive{Level: FilterError})
	}
	return newFilter(dirs)
}

func newFilter(dirs []Directive) *Filter {
	f := &Filter{directives: dirs}
	var stats, dynStats []staticDirective
	for _, d := range dirs {
		if d.Level > f.maxLevel {
			f.maxLevel = d.Level
		}
		if d.isDynamic() {
			f.addDynamic(d)
		}
		if d.isStatic() {
			names := make([]string, 0, len(d.Fields))
			for _, m := range d.Fields {
				names = append(names, m.Name)
			}
			s := staticDirective{target: d.Target, hasTarget: d.HasTarget, fieldNames: names, level: d.Level}
			if d.isDynamic() {
				dynStats = append(dynStats, s)
			} else {
				stats = append(stats, s)
			}
		}
	}
	// EnvFilter adds plain statics first, then those derived from dynamic directives; an
	// equally specific later directive replaces the earlier one.
	for _, s := range append(stats, dynStats...) {
		f.addStatic(s)
	}
	return f
}

func (f *Filter) addStatic(s staticDirective) {
	if len(s.fieldNames) > 0 {
		f.needsFields = true
	}
	for i, old := range f.statics {
		if moreSpecificStatic(old, s) == 0 {
			f.statics[i] = s
			return
		}
	}
	f.statics = append(f.statics, s)
	sort.SliceStable(f.statics, func(i, j int) bool { return moreSpecificStatic(f.statics[i], f.statics[j]) < 0 })
}

func (f *Filter) addDynamic(d Directive) {
	if d.Level > f.maxDynamic {
		f.maxDynamic = d.Level
	}
	for i, old := range f.dynamics {
		if sameDynamic(old, d) {
			f.dynamics[i] = d
			return
		}
	}
	f.dynamics = append(f.dynamics, d)
}

func sameDynamic(a, b Directive) bool {
	if a.HasTarget != b.HasTarget || a.Target != b.Target || a.HasSpan != b.HasSpan || a.Span != b.Span || len(a.Fields) != len(b.Fields) {
		return false
	}
	for i := range a.Fields {
		if a.Fields[i].Name != b.Fields[i].Name || a.Fields[i].HasValue != b.Fields[i].HasValue || a.Fields[i].Value != b.Fields[i].Value {
			return false
		}
	}
	return true
}

// Directives returns the directives that survived parsing, in the order given.
func (f *Filter) Directives() []Directive { return append([]Directive(nil), f.directives...) }

// MaxLevel is the most verbose level any directive enables.
func (f *Filter) MaxLevel() LevelFilter { return f.maxLevel }

// spanLevel is the level the dynamic directives enable inside the reconcile span: the most
// verbose of those whose target, span name, field names and field values all match (EnvFilter
// takes the maximum here, not the most specific).
func (f *Filter) spanLevel(s *Span) LevelFilter {
	level := FilterOff
	for _, d := range f.dynamics {
		if d.HasTarget && !strings.HasPrefix(SpanTarget, d.Target) {
			continue
		}
		if d.HasSpan && d.Span != SpanName {
			continue
		}
		ok := true
		for _, m := range d.Fields {
			var v string
			switch m.Name {
			case spanFieldRef:
				v = s.Ref
			case spanFieldReason:
				v = s.Reason
			default:
				ok = false
			}
			if ok && m.HasValue && (m.pattern == nil || !m.pattern.MatchString(v)) {
				ok = false
			}
			if !ok {
				break
			}
		}
		if ok && d.Level > level {
			level = d.Level
		}
	}
	return level
}

// Enabled reports whether an event passes the filter. span is the enclosing reconcile span or
// nil; hasField reports the event's field names (nil when not known yet, in which case
// directives that name fields do not match). library marks output of controller-runtime,
// client-go and klog: a directive without a target (a bare level such as `info`) lets it
// through at WARN at most, so libraries speak below WARN only when a directive names their
// target (`controller_runtime=info`).
func (f *Filter) Enabled(target string, v LevelFilter, span *Span, library bool, hasField func(string) bool) bool {
	if v > f.maxLevel || v == FilterOff {
		return false
	}
	if span != nil && len(f.dynamics) > 0 && f.maxDynamic >= v && f.spanLevel(span) >= v {
		return true
	}
	for _, d := range f.statics {
		if !d.caresAbout(target, hasField) {
			continue
		}
		l := d.level
		if library && !d.hasTarget && l > FilterWarn {
			l = FilterWarn
		}
		return l >= v
	}
	return false
}
