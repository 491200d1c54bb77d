package logging

import (
	"bytes"
	"strings"
	"testing"

	"go.uber.org/zap"
)

const levelErr = "error parsing level filter: expected one of \"off\", \"error\", \"warn\", \"info\", \"debug\", \"trace\", or a number 0-5"

func TestParseDirective(t *testing.T) {
	tgt := func(s string, l LevelFilter) Directive { return Directive{Target: s, HasTarget: true, Level: l} }
	for _, tc := range []struct {
		in      string
		want    Directive
		wantErr string
	}{
		{in: "info", want: Directive{Level: FilterInfo}},
		{in: "INFO", want: Directive{Level: FilterInfo}},
		{in: "Warn", want: Directive{Level: FilterWarn}},
		{in: "off", want: Directive{Level: FilterOff}},
		{in: "0", want: Directive{Level: FilterOff}},
		{in: "1", want: Directive{Level: FilterError}},
		{in: "3", want: Directive{Level: FilterInfo}},
		{in: "5", want: Directive{Level: FilterTrace}},
		{in: "operator=+4", want: tgt("operator", FilterDebug)},
		{in: "+4", wantErr: "invalid filter directive"}, // "+" cannot start a piece
		// Not a level, so a target enabled at TRACE, silently (EnvFilter does the same).
		{in: "6", want: tgt("6", FilterTrace)},
		{in: "warning", want: tgt("warning", FilterTrace)},
		{in: "operator", want: tgt("operator", FilterTrace)},
		{in: "operator=debug", want: tgt("operator", FilterDebug)},
		{in: "operator::controller::acl=TRACE", want: tgt("operator::controller::acl", FilterTrace)},
		{in: "operator=4", want: tgt("operator", FilterDebug)},
		{in: "operator=0", want: tgt("operator", FilterOff)},
		{in: "operator=", want: tgt("operator", FilterTrace)},
		{in: "-x_y:z", want: tgt("-x_y:z", FilterTrace)},
		{in: "a b", want: tgt("a b", FilterTrace)},
		// Offsets from the trimmed piece slice the untrimmed one.
		{in: " info", want: tgt(" info", FilterTrace)},
		{in: "info ", want: tgt("info ", FilterTrace)},
		{in: "[reconciling object]=debug", want: Directive{Span: SpanName, HasSpan: true, Level: FilterDebug}},
		{in: "kube_runtime[reconciling object]", want: Directive{Target: "kube_runtime", HasTarget: true, Span: SpanName, HasSpan: true, Level: FilterTrace}},
		{in: "[{object.ref}]=info", want: Directive{Fields: []FieldMatch{{Name: "object.ref"}}, Level: FilterInfo}},
		// Errors.
		{in: "operator=verbose", wantErr: levelErr},
		{in: "operator=debug=x", wantErr: levelErr},
		{in: "=info", wantErr: "invalid filter directive"},
		{in: "!operator", wantErr: "invalid filter directive"},
		{in: "  ", wantErr: "invalid filter directive"},
		{in: "[span", wantErr: "invalid filter directive"},
		{in: "[span]x", wantErr: "invalid filter directive"},
		{in: "[{a}x]", wantErr: "invalid filter directive"},
		{in: "[{}]", wantErr: "invalid filter directive"},
		{in: "[{a=b}", wantErr: "invalid filter directive"},
		{in: " operator=debug", wantErr: levelErr},
		{in: "[{a=(}]", wantErr: "invalid field filter: "},
	} {
		got, err := ParseDirective(tc.in)
		if tc.wantErr != "" {
			if err == nil || !strings.HasPrefix(err.Error(), tc.wantErr) {
				t.Errorf("ParseDirective(%q) error = %v, want %q", tc.in, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseDirective(%q): %v", tc.in, err)
			continue
		}
		for i := range got.Fields {
			got.Fields[i].pattern = nil
		}
		if !equalDirective(got, tc.want) {
			t.Errorf("ParseDirective(%q) = %+v, want %+v", tc.in, got, tc.want)
		}
	}
}

func equalDirective(a, b Directive) bool {
	return sameDynamic(a, b) && a.Level == b.Level
}

func TestParseFilterStderr(t *testing.T) {
	for _, tc := range []struct {
		in, stderr string
		kept       int
	}{
		{in: "info", stderr: "", kept: 1},
		{in: "info,,operator=debug,", stderr: "", kept: 2},
		{in: "info,operator=verbose", stderr: "ignoring `operator=verbose`: " + levelErr + "\n", kept: 1},
		{in: "=info, operator=debug,!x,warn", kept: 1, stderr: "ignoring `=info`: invalid filter directive\n" +
			"ignoring ` operator=debug`: " + levelErr + "\n" +
			"ignoring `!x`: invalid filter directive\n"},
		{in: "info,  ", stderr: "ignoring `  `: invalid filter directive\n", kept: 1},
		{in: "[unclosed", stderr: "ignoring `[unclosed`: invalid filter directive\n", kept: 1}, // the error default
		{in: "", kept: 1},
	} {
		var stderr bytes.Buffer
		f := ParseFilter(tc.in, &stderr)
		if stderr.String() != tc.stderr {
			t.Errorf("ParseFilter(%q) stderr = %q, want %q", tc.in, stderr.String(), tc.stderr)
		}
		if got := len(f.Directives()); got != tc.kept {
			t.Errorf("ParseFilter(%q) kept %d directives, want %d", tc.in, got, tc.kept)
		}
	}
}

func TestFilterEnabled(t *testing.T) {
	acl, cluster := TargetACL, TargetCluster
	span := &Span{Ref: clusterRef, Reason: ReasonObjectUpdated}
	type probe struct {
		target  string
		level   LevelFilter
		span    *Span
		library bool
		want    bool
	}
	for _, tc := range []struct {
		spec   string
		probes []probe
	}{
		// Unset or empty: error only (the deliberate difference), for libraries too.
		{"", []probe{{cluster, FilterError, nil, false, true}, {cluster, FilterWarn, nil, false, false}, {"controller_runtime", FilterError, nil, true, true}}},
		{",", []probe{{cluster, FilterError, nil, false, true}, {cluster, FilterWarn, nil, false, false}}},
		{"bogus=x", []probe{{cluster, FilterError, nil, false, true}, {cluster, FilterWarn, nil, false, false}}},
		{"info", []probe{{cluster, FilterInfo, nil, false, true}, {cluster, FilterDebug, nil, false, false}, {"anything", FilterInfo, nil, false, true}}},
		// Precedence: the longest matching target wins, whatever the order.
		{"info,operator=debug", []probe{{acl, FilterDebug, nil, false, true}, {acl, FilterTrace, nil, false, false}, {"other", FilterDebug, nil, false, false}, {"other", FilterInfo, nil, false, true}}},
		{"operator::controller::acl=warn,operator=debug", []probe{{acl, FilterInfo, nil, false, false}, {acl, FilterWarn, nil, false, true}, {cluster, FilterDebug, nil, false, true}}},
		{"operator=debug,operator::controller::acl=warn", []probe{{acl, FilterInfo, nil, false, false}, {cluster, FilterDebug, nil, false, true}}},
		// Equally specific: the later directive replaces the earlier one.
		{"warn,info", []probe{{cluster, FilterInfo, nil, false, true}}},
		{"info,warn", []probe{{cluster, FilterInfo, nil, false, false}, {cluster, FilterWarn, nil, false, true}}},
		{"operator=info,operator=warn", []probe{{cluster, FilterInfo, nil, false, false}}},
		// Prefix matching is on the string, not on `::` boundaries (as EnvFilter).
		{"operator::controller=debug", []probe{{"operator::controllers_extra", FilterDebug, nil, false, true}, {"operator::fsm", FilterError, nil, false, false}}},
		{"oper=debug", []probe{{cluster, FilterDebug, nil, false, true}}},
		{"operator::controller::cluster::x=debug", []probe{{cluster, FilterError, nil, false, false}}},
		// off.
		{"off", []probe{{cluster, FilterError, nil, false, false}, {"x", FilterError, nil, true, false}}},
		{"info,operator::controller::acl=off", []probe{{acl, FilterError, nil, false, false}, {cluster, FilterInfo, nil, false, true}}},
		{"operator=off,info", []probe{{cluster, FilterError, nil, false, false}, {"x", FilterInfo, nil, false, true}}},
		// Numeric levels.
		{"1,operator=4", []probe{{cluster, FilterDebug, nil, false, true}, {cluster, FilterTrace, nil, false, false}, {"x", FilterWarn, nil, false, false}, {"x", FilterError, nil, false, true}}},
		{"0", []probe{{cluster, FilterError, nil, false, false}}},
		{"5", []probe{{cluster, FilterTrace, nil, false, true}}},
		// Only targeted directives: other targets are off, as in EnvFilter.
		{"operator=debug", []probe{{"controller_runtime", FilterError, nil, true, false}}},
		// Libraries: a bare level lets them through at WARN at most; naming them lifts that.
		{"info", []probe{{"controller_runtime::cache", FilterInfo, nil, true, false}, {"controller_runtime::cache", FilterWarn, nil, true, true}}},
		{"trace", []probe{{"kube_client", FilterDebug, nil, true, false}}},
		{"warn", []probe{{"kube_client", FilterWarn, nil, true, true}}},
		{"error", []probe{{"kube_client", FilterWarn, nil, true, false}}},
		{"info,controller_runtime=debug", []probe{{"controller_runtime::cache", FilterDebug, nil, true, true}, {"kube_client", FilterInfo, nil, true, false}}},
		// Span directives apply inside the reconcile span only.
		{"warn,[reconciling object]=debug", []probe{{cluster, FilterDebug, span, false, true}, {cluster, FilterDebug, nil, false, false}, {cluster, FilterTrace, span, false, false}}},
		{"warn,kube_runtime[reconciling object]=debug", []probe{{cluster, FilterDebug, span, false, true}}},
		{"warn,operator[reconciling object]=debug", []probe{{cluster, FilterDebug, span, false, false}}},
		{"warn,[other span]=debug", []probe{{cluster, FilterDebug, span, false, false}}},
		{"warn,[{object.ref=.*/my-cluster\\.my-app}]=trace", []probe{{cluster, FilterTrace, span, false, true}}},
		{"warn,[{object.ref=.*/other\\.my-app}]=trace", []probe{{cluster, FilterTrace, span, false, false}}},
		{"warn,[{object.reason=object updated}]=debug", []probe{{cluster, FilterDebug, span, false, true}}},
		{"warn,[{object.reason=object}]=debug", []probe{{cluster, FilterDebug, span, false, false}}},
	} {
		f := ParseFilter(tc.spec, nil)
		for _, p := range tc.probes {
			if got := f.Enabled(p.target, p.level, p.span, p.library, nil); got != p.want {
				t.Errorf("RUST_LOG=%q: Enabled(%s, %s, span=%v, library=%v) = %v, want %v",
					tc.spec, p.target, p.level, p.span != nil, p.library, got, p.want)
			}
		}
	}
}

// Directives that name fields are decided with the event's fields, in Write.
func TestFieldNameDirective(t *testing.T) {
	var out bytes.Buffer
	l := Target(New(&out, nil, "warn,[{cluster_name}]=debug", fixedClock), TargetCluster)
	l.Debug("with", ClusterName("a"))
	l.Debug("without")
	l.Info("info without")
	l.Warn("warn without")
	got := out.String()
	if !strings.Contains(got, `"with"`) || strings.Contains(got, `"without"`) || strings.Contains(got, "info without") || !strings.Contains(got, "warn without") {
		t.Errorf("unexpected output:\n%s", got)
	}
}

// Events inside a reconcile carry the span at every verbosity, and New writes invalid pieces to
// stderr before any JSON.
func TestNewSpanAtEveryVerbosity(t *testing.T) {
	for _, spec := range []string{"", "error", "warn", "info", "trace", "operator=warn"} {
		var out, errOut bytes.Buffer
		l := InSpan(Target(New(&out, &errOut, spec+",=x", fixedClock), TargetCluster), Span{Ref: clusterRef, Reason: ReasonObjectUpdated})
		if errOut.String() != "ignoring `=x`: invalid filter directive\n" {
			t.Errorf("RUST_LOG=%q: stderr %q", spec, errOut.String())
		}
		l.Error("broken invariant", zap.Bool("x", true))
		if !strings.Contains(out.String(), `"spans":[{"object.reason":"object updated","object.ref":"`+clusterRef+`","name":"reconciling object"}]}`) {
			t.Errorf("RUST_LOG=%q: no span in %q", spec, out.String())
		}
	}
}
