package monitoring

import (
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// TestAlertRulesCheck: promtool parses every rule and finds nothing to lint (duplicates, a
// misspelled field).
func TestAlertRulesCheck(t *testing.T) {
	out := run(t, promtool(t), "check", "rules", "--lint=all", "--lint-fatal", alertsPath())
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules:\n%s", out)
	}
}

// TestAlertRulesUnit runs the unit tests of testdata/*.yaml: each alert fires, with its labels
// and annotations, on the series that should fire it, and stays quiet on healthy ones.
func TestAlertRulesUnit(t *testing.T) {
	files := unitTestFiles(t)
	out := run(t, promtool(t), append([]string{"test", "rules"}, files...)...)
	t.Logf("promtool test rules:\n%s", out)
}

func unitTestFiles(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(repoRoot(), "tests", "monitoring", "testdata", "*_test.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no testdata/*_test.yaml: %v", err)
	}
	sort.Strings(files)
	return files
}

// unitTests is what the promtool unit-test files say about each alert.
type unitTests struct {
	RuleFiles []string `json:"rule_files"`
	Tests     []struct {
		AlertRuleTest []struct {
			Alertname string `json:"alertname"`
			ExpAlerts []any  `json:"exp_alerts"`
		} `json:"alert_rule_test"`
	} `json:"tests"`
}

// TestEveryAlertIsUnitTested: each alert of alerts.yaml has a case where it fires and one where
// it stays quiet, and the unit tests load alerts.yaml itself, not a copy.
func TestEveryAlertIsUnitTested(t *testing.T) {
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, path := range unitTestFiles(t) {
		var u unitTests
		if err := yaml.Unmarshal(readFile(t, path), &u); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if len(u.RuleFiles) != 1 || filepath.Clean(filepath.Join(filepath.Dir(path), u.RuleFiles[0])) != filepath.Clean(alertsPath()) {
			t.Errorf("%s: rule_files %v, want only chart/files/alerts.yaml", filepath.Base(path), u.RuleFiles)
		}
		for _, tc := range u.Tests {
			for _, a := range tc.AlertRuleTest {
				if len(a.ExpAlerts) > 0 {
					fires[a.Alertname] = true
				} else {
					quiet[a.Alertname] = true
				}
			}
		}
	}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if !fires[r.Alert] {
				t.Errorf("%s: no unit test where it fires", r.Alert)
			}
			if !quiet[r.Alert] {
				t.Errorf("%s: no unit test where it stays quiet", r.Alert)
			}
		}
	}
}

// TestAlertRulesQueryExistingMetrics: every metric the rules query is exported by the operator
// (metrics.Names()), by controller-runtime, or is Prometheus's own up.
func TestAlertRulesQueryExistingMetrics(t *testing.T) {
	known := knownNames(t)
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			checkNames(t, r.Alert, r.Expr, known)
		}
	}
}

// TestAlertRulesShape: every alert says how bad it is and what to look at: a severity, a summary
// and a description naming what it is about (the cluster, and the pod for per-node alerts), and a
// hint (`Look at:` and a command).
func TestAlertRulesShape(t *testing.T) {
	seen := map[string]bool{}
	for _, g := range readRules(t).Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Record != "" {
				t.Errorf("group %s: %q is not an alert: alerts.yaml holds alerts only", g.Name, r.Record)
				continue
			}
			if seen[r.Alert] {
				t.Errorf("%s: two alerts of that name", r.Alert)
			}
			seen[r.Alert] = true
			if s := r.Labels["severity"]; s != "critical" && s != "warning" {
				t.Errorf("%s: severity %q, want critical or warning", r.Alert, s)
			}
			sum, desc := r.Annotations["summary"], r.Annotations["description"]
			if sum == "" || desc == "" {
				t.Errorf("%s: wants a summary and a description", r.Alert)
				continue
			}
			if !strings.Contains(desc, "Look at:") || !strings.Contains(desc, "kubectl") {
				t.Errorf("%s: the description has no hint of what to look at (Look at: kubectl ...)", r.Alert)
			}
			var about []string
			switch g.Name {
			case "valkey-cluster":
				about = []string{"{{ $labels.namespace }}/{{ $labels.cluster }}"}
			case "valkey-node":
				about = []string{"{{ $labels.namespace }}/{{ $labels.cluster }}", "{{ $labels.pod }}"}
			}
			for _, a := range about {
				if !strings.Contains(sum+desc, a) {
					t.Errorf("%s: its annotations do not name %s", r.Alert, a)
				}
			}
			if g.Name != "valkey-operator" {
				jq := `jq 'select(.fields.cluster_name == "{{ $labels.cluster }}"`
				describe := "describe valkeycluster {{ $labels.cluster }}"
				if !strings.Contains(desc, jq) && !strings.Contains(desc, describe) {
					t.Errorf("%s: the hint names neither the operator log's query for the cluster nor kubectl describe valkeycluster", r.Alert)
				}
			}
		}
	}
	for _, g := range readRules(t).Groups {
		if !slices.Contains([]string{"valkey-operator", "valkey-cluster", "valkey-node"}, g.Name) {
			t.Errorf("group %s: this test knows valkey-operator, valkey-cluster and valkey-node", g.Name)
		}
	}
}
