package v1alpha1_test

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"

	"github.com/gomomento/valkey-operator/apis/v1alpha1"
)

// crdPlurals are the five kinds, by their CRDs' plural names.
var crdPlurals = []string{"valkeyclusters", "valkeyconfigs", "valkeyimages", "valkeynodes", "valkeyroles"}

// The Kubernetes floor (README, "Kubernetes versions"). A kube-apiserver of minor version N
// compiles the CEL rules of a new or changed CRD against the environment of version N-1 (its
// minimum compatibility version), so that a rollback to N-1 can still run them. Compiling every
// rule of the generated CRDs against those environments says which apiserver accepts them:
//   - 1.29 (environment 1.28) compiles all of them;
//   - 1.28 and 1.27 do not: the resources.cpu / resources.memory rules use the Kubernetes
//     quantity library (isQuantity, quantity), which joined the environment in 1.28.
//
// The rest of the floor is not CEL and is stated in the README: the fieldPath of a validation
// rule is a 1.28 field, messageExpression a 1.27 one. This test uses the cost estimator of the
// apiserver version the module builds with, so it does not prove an older one's estimate.
func TestCRDRulesCompileOnTheFloor(t *testing.T) {
	const floorMinor = 29
	failing := func(envMinor uint) []string {
		var out []string
		for _, plural := range crdPlurals {
			out = append(out, compileErrors(t, readCRD(t, plural), version.MajorMinor(1, envMinor))...)
		}
		return out
	}
	if errs := failing(floorMinor - 1); len(errs) > 0 {
		t.Errorf("on Kubernetes 1.%d, these rules would not compile:\n%s", floorMinor, strings.Join(errs, "\n"))
	}
	below := failing(floorMinor - 2)
	if len(below) == 0 {
		t.Fatalf("every rule compiles on Kubernetes 1.%d: lower the floor in this test and the README", floorMinor-1)
	}
	for _, e := range below {
		if !strings.Contains(e, "isQuantity") && !strings.Contains(e, "quantity(") {
			t.Errorf("on Kubernetes 1.%d a rule fails for a reason the README does not give: %s", floorMinor-1, e)
		}
	}
}

// compileErrors compiles every x-kubernetes-validations rule of crd's schema, and its
// messageExpression, in the new-expressions environment of CEL environment version env.
func compileErrors(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, env *version.Version) []string {
	t.Helper()
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	root, err := schema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	envSet := environment.MustBaseEnvSet(env)
	var errs []string
	var walk func(s *schema.Structural, path string, isRoot bool)
	walk = func(s *schema.Structural, path string, isRoot bool) {
		if s == nil {
			return
		}
		if len(s.XValidations) > 0 {
			results, err := cel.Compile(s, model.SchemaDeclType(s, isRoot), celconfig.PerCallLimit, envSet, cel.NewExpressionsEnvLoader())
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s %s: %v", crd.Name, path, err))
			}
			for i, r := range results {
				if r.Error != nil {
					errs = append(errs, fmt.Sprintf("%s %s rule %q: %v", crd.Name, path, s.XValidations[i].Rule, r.Error))
				}
				if r.MessageExpressionError != nil {
					errs = append(errs, fmt.Sprintf("%s %s messageExpression %q: %v", crd.Name, path, s.XValidations[i].MessageExpression, r.MessageExpressionError))
				}
			}
		}
		for _, name := range slices.Sorted(func(yield func(string) bool) {
			for k := range s.Properties {
				if !yield(k) {
					return
				}
			}
		}) {
			p := s.Properties[name]
			walk(&p, path+"."+name, false)
		}
		walk(s.Items, path+"[]", false)
		if s.AdditionalProperties != nil {
			walk(s.AdditionalProperties.Structural, path+"{}", false)
		}
	}
	walk(root, "", true)
	return errs
}

// An integer field needs a minimum and a maximum in the schema itself, not only a CEL rule: an
// API server before 1.36 drops `format: int32` from a CRD's schema, so it would store
// replicasPerShard: 2147483648, and then the operator could not decode its list of
// ValkeyClusters any more (new clusters get no status; a restarted operator never syncs its
// cache). A CEL rule does not help: CEL reads every integer as an int64, which holds the value.
//
// integerField is one property of type integer, where it sits in the CRD, and its bounds.
type integerField struct {
	path     []pathStep
	format   string
	min, max *float64
}

// pathStep is one step from an object's root to a property: a property name, the first item of
// a list (item), or the value of a map under the key "k" (value).
type pathStep struct {
	name        string
	item, value bool
}

func (f integerField) String() string {
	var b strings.Builder
	for _, s := range f.path {
		switch {
		case s.item:
			b.WriteString("[0]")
		case s.value:
			b.WriteString("[k]")
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(s.name)
		}
	}
	return b.String()
}

// withValue returns an object that holds v at the field and nothing else.
func (f integerField) withValue(v any) map[string]any {
	var build func(steps []pathStep) any
	build = func(steps []pathStep) any {
		if len(steps) == 0 {
			return v
		}
		inner := build(steps[1:])
		switch s := steps[0]; {
		case s.item:
			return []any{inner}
		case s.value:
			return map[string]any{"k": inner}
		default:
			return map[string]any{s.name: inner}
		}
	}
	return build(f.path).(map[string]any)
}

// conditionObservedGeneration is the one integer field without a maximum: it belongs to
// metav1.Condition, whose schema (minimum 0, int64) is Kubernetes', not ours to mark. An int64
// has nothing to fear from a dropped format: the API server decodes a JSON integer past the
// int64 range as a float, which is not an integer past 2^53 and is refused (checked below).
const conditionObservedGeneration = "status.conditions[0].observedGeneration"

// internalSchema is the CRD's schema as the API server validates it, with every format removed
// (as a server before 1.36 does with int32) and, with noBounds, every minimum and maximum too.
func internalSchema(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition, noBounds bool) *apiextensions.JSONSchemaProps {
	t.Helper()
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	var strip func(s *apiextensions.JSONSchemaProps)
	strip = func(s *apiextensions.JSONSchemaProps) {
		s.Format = ""
		if noBounds {
			s.Minimum, s.Maximum = nil, nil
		}
		for name, p := range s.Properties {
			strip(&p)
			s.Properties[name] = p
		}
		if s.Items != nil && s.Items.Schema != nil {
			strip(s.Items.Schema)
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			strip(s.AdditionalProperties.Schema)
		}
	}
	strip(&internal)
	return &internal
}

// integerFields lists every property of type integer in crd's schema, formats as generated.
// Quantities (x-kubernetes-int-or-string, such as a ValkeyConfig's resources.memory) are not of
// type integer: they decode into a resource.Quantity, which holds any number.
func integerFields(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) []integerField {
	t.Helper()
	var out []integerField
	var walk func(s *apiextensionsv1.JSONSchemaProps, path []pathStep)
	walk = func(s *apiextensionsv1.JSONSchemaProps, path []pathStep) {
		if s.Type == "integer" {
			out = append(out, integerField{path: slices.Clone(path), format: s.Format, min: s.Minimum, max: s.Maximum})
		}
		for _, name := range slices.Sorted(maps.Keys(s.Properties)) {
			p := s.Properties[name]
			walk(&p, append(path, pathStep{name: name}))
		}
		if s.Items != nil && s.Items.Schema != nil {
			walk(s.Items.Schema, append(path, pathStep{item: true}))
		}
		if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
			walk(s.AdditionalProperties.Schema, append(path, pathStep{value: true}))
		}
	}
	walk(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, nil)
	return out
}

// Every integer property of every generated CRD has a minimum and a maximum in the schema, and
// within its Go type: a new integer field without bounds fails here.
func TestEveryIntegerFieldIsBounded(t *testing.T) {
	found := 0
	for _, plural := range crdPlurals {
		for _, f := range integerFields(t, readCRD(t, plural)) {
			found++
			if f.String() == conditionObservedGeneration {
				if f.min == nil || *f.min != 0 || f.format != "int64" {
					t.Errorf("%s %s: want metav1.Condition's minimum 0 and format int64", plural, f)
				}
				continue
			}
			if f.min == nil || f.max == nil {
				t.Errorf("%s %s has no minimum or no maximum in its schema", plural, f)
				continue
			}
			lo, hi := float64(math.MinInt32), float64(math.MaxInt32)
			if f.format != "int32" {
				lo, hi = 0, v1alpha1.MaxExactJSONInteger
			}
			if *f.min < lo || *f.max > hi || *f.min > *f.max {
				t.Errorf("%s %s: bounds [%v, %v] are not within [%v, %v] (format %q)", plural, f, *f.min, *f.max, lo, hi, f.format)
			}
		}
	}
	if found < 8 {
		t.Fatalf("found only %d integer fields: the schema walk misses some", found)
	}
}

// The proof of the bounds: the API server's own structural-schema validator, given each CRD's
// schema with every format removed (as a server before 1.36 does), refuses a value past the
// field's Go type at every integer field, and past its bounds; it accepts the bounds themselves.
// Without the minimum and maximum it would store the value past int32, which is the bug.
func TestIntegersPastTheirTypeAreRefusedWithoutFormat(t *testing.T) {
	for _, plural := range crdPlurals {
		crd := readCRD(t, plural)
		bounded, _, err := validation.NewSchemaValidator(internalSchema(t, crd, false))
		if err != nil {
			t.Fatal(err)
		}
		unbounded, _, err := validation.NewSchemaValidator(internalSchema(t, crd, true))
		if err != nil {
			t.Fatal(err)
		}
		// errorsAt returns the validation errors at the field f.
		errorsAt := func(validator validation.SchemaValidator, f integerField, v any) []string {
			var out []string
			for _, e := range validation.ValidateCustomResource(nil, f.withValue(v), validator) {
				if e.Field == f.String() {
					out = append(out, e.Error())
				}
			}
			return out
		}
		for _, f := range integerFields(t, crd) {
			if f.String() == conditionObservedGeneration {
				// Past int64: the API server's JSON decoding gives a float64.
				if errs := errorsAt(bounded, f, 1e19); len(errs) == 0 {
					t.Errorf("%s %s: 1e19 (past int64, decoded as a float) accepted", plural, f)
				}
				continue
			}
			if f.min == nil || f.max == nil {
				continue // TestEveryIntegerFieldIsBounded says so
			}
			above, below := []int64{int64(*f.max) + 1}, []int64{int64(*f.min) - 1}
			if f.format == "int32" {
				above, below = append(above, math.MaxInt32+1), append(below, math.MinInt32-1)
				if errs := errorsAt(unbounded, f, int64(math.MaxInt32+1)); len(errs) > 0 {
					t.Errorf("%s %s: without bounds and format, the validator already refuses 2147483648 (%v); this test no longer shows the bug", plural, f, errs)
				}
			}
			refusedBy := func(values []int64, want string) {
				for _, v := range values {
					errs := errorsAt(bounded, f, v)
					if !slices.ContainsFunc(errs, func(e string) bool { return strings.Contains(e, want) }) {
						t.Errorf("%s %s: %d without format gave %v, want refused as %q", plural, f, v, errs, want)
					}
				}
			}
			refusedBy(above, "should be less than or equal to")
			refusedBy(below, "should be greater than or equal to")
			for _, v := range []int64{int64(*f.min), int64(*f.max)} {
				if errs := errorsAt(bounded, f, v); len(errs) > 0 {
					t.Errorf("%s %s: %d refused: %v", plural, f, v, errs)
				}
			}
		}
	}
}
