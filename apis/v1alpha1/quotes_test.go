package v1alpha1_test

import (
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// quoteRule is the CRD's rule on a directive value's quotes, as a Go regular expression (RE2,
// the syntax CEL's matches uses): the rule's CEL string literal with its escapes undone.
func quoteRule(t *testing.T) *regexp.Regexp {
	t.Helper()
	crd := readCRD(t, "valkeyconfigs")
	value := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["valkey"].AdditionalProperties.Schema
	for _, r := range value.XValidations {
		if lit, ok := strings.CutPrefix(r.Rule, "self.matches('"); ok && strings.Contains(r.Message, "quoted as valkey.conf reads them") {
			lit = strings.TrimSuffix(lit, "')")
			var re strings.Builder // the CEL string's escapes, \\ and \', undone
			for i := 0; i < len(lit); i++ {
				if lit[i] == '\\' && i+1 < len(lit) {
					i++
				}
				re.WriteByte(lit[i])
			}
			return regexp.MustCompile(re.String())
		}
	}
	t.Fatal("the CRD has no quote rule on spec.valkey's values")
	return nil
}

// TestQuoteRuleIsTheSplitter: admission (the CRD's regular expression) and the operator's
// check of a stored config (CheckDirective) agree on which values valkey.conf can read, over
// the values Valkey's own config reader accepts and refuses (a valkey.conf line
// `notify-keyspace-events "Ex` stops valkey-server with "Unbalanced quotes in configuration
// line"; every case below was read from a valkey.conf line by
// valkey-server 8.0.1 on 2026-12-07, the refused ones all with that error), and over 20 000
// random strings of quotes, backslashes and spaces.
func TestQuoteRuleIsTheSplitter(t *testing.T) {
	re := quoteRule(t)
	valid := func(v string) bool { return v1alpha1.CheckDirective("notify-keyspace-events", v) == nil }
	cases := map[string]bool{
		``: true, `Ex`: true, `""`: true, `"3600 1 300 100"`: true, `'a b'`: true, `a"b c"`: true,
		`"a\"b"`: true, `'a\'b'`: true, `"a\\"`: true, `"x" y`: true, `a\b`: true, `"\x41"`: true,
		`"Ex`: false, `Ex"`: false, `'a`: false, `"a"b`: false, `'a'b`: false, `"a\"`: false, `'a\'`: false,
		`"\`: false, `'\\'`: false, `'\\\'`: false, `"a" "b`: false,
	}
	for v, want := range cases {
		if got := valid(v); got != want {
			t.Errorf("CheckDirective(%q): valid %v, want %v", v, got, want)
		}
		if got := re.MatchString(v); got != want {
			t.Errorf("CRD rule on %q: valid %v, want %v", v, got, want)
		}
	}
	r := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte{'a', ' ', '"', '\'', '\\', '\t', 'x'}
	for range 20_000 {
		b := make([]byte, r.IntN(9))
		for i := range b {
			b[i] = alphabet[r.IntN(len(alphabet))]
		}
		if v := string(b); valid(v) != re.MatchString(v) {
			t.Errorf("%q: CheckDirective valid %v, CRD rule valid %v", v, valid(v), re.MatchString(v))
		}
	}
	if err := v1alpha1.CheckDirective("notify-keyspace-events", `"Ex`); err == nil || !strings.Contains(err.Error(), "valkey directive notify-keyspace-events: valkey directive values must be quoted") {
		t.Errorf("the refusal does not name the directive and say what to fix: %v", err)
	}
}
