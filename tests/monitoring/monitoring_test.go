// Package monitoring tests what a platform team loads into its monitoring: the alert rules of
// chart/files/alerts.yaml (checked and unit-tested by promtool), the Grafana dashboard of
// chart/files/dashboard.json, and the chart templates that ship them (PrometheusRule,
// ServiceMonitor, the dashboard's ConfigMap). No cluster is needed: promtool evaluates the rules
// on the series of testdata/*.yaml, and every metric the rules and the dashboard query must be
// one the operator exports (package metrics) or controller-runtime registers.
//
// promtool is $PROMTOOL (the Makefile exports it), else ~/.cache/valkey-operator/bin/promtool;
// `make prometheus` builds it (hack/build-prometheus.sh), and `make test` does first. helm is
// built by hack/install-helm.sh when missing, as for tests/install.
package monitoring

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// repoRoot is the checkout this file is in.
func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

func chartDir() string   { return filepath.Join(repoRoot(), "chart") }
func alertsPath() string { return filepath.Join(chartDir(), "files", "alerts.yaml") }

// promtool finds the promtool that `make prometheus` built. It never builds it (a cold build
// takes minutes) and never skips: a missing promtool fails the test with what to run.
func promtool(t *testing.T) string {
	t.Helper()
	path := os.Getenv("PROMTOOL")
	from := "$PROMTOOL"
	if path == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			t.Fatalf("no $PROMTOOL and no home directory: %v", err)
		}
		path = filepath.Join(home, ".cache", "valkey-operator", "bin", "promtool")
		from = "~/.cache/valkey-operator/bin/promtool"
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("promtool not found (%s: %v): run `make prometheus` (hack/build-prometheus.sh builds it from the Go module proxy)", from, err)
	}
	return path
}

// ruleFile is a Prometheus rule file, as much of it as the tests read.
type ruleFile struct {
	Groups []ruleGroup `json:"groups"`
}

type ruleGroup struct {
	Name  string `json:"name"`
	Rules []rule `json:"rules"`
}

type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

func readRules(t *testing.T) ruleFile {
	t.Helper()
	var f ruleFile
	if err := yaml.UnmarshalStrict(readFile(t, alertsPath()), &f); err != nil {
		t.Fatalf("%s: %v", alertsPath(), err)
	}
	if len(f.Groups) == 0 {
		t.Fatalf("%s has no groups", alertsPath())
	}
	return f
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// run runs a command and fails the test with its output when it fails.
func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = repoRoot()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
	}
	return string(out)
}
