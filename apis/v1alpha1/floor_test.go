package v1alpha1_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel/model"
	"k8s.io/apimachinery/pkg/util/version"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

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
		for _, plural := range []string{"valkeyclusters", "valkeyconfigs", "valkeyimages", "valkeynodes", "valkeyroles"} {
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
