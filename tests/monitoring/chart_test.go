package monitoring

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

var (
	helmOnce sync.Once
	helmPath string
	helmErr  error
)

// helm returns helm as pinned in hack/tools/go.mod, building it on first use.
func helm(t *testing.T) string {
	t.Helper()
	helmOnce.Do(func() {
		cmd := exec.Command("bash", filepath.Join(repoRoot(), "hack", "install-helm.sh"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			helmErr = fmt.Errorf("hack/install-helm.sh: %w\n%s", err, stderr.String())
			return
		}
		helmPath = strings.TrimSpace(string(out))
	})
	if helmErr != nil {
		t.Fatal(helmErr)
	}
	return helmPath
}

// The values that turn on each monitoring object.
const (
	withRule      = "monitoring.prometheusRule.enabled=true"
	withMonitor   = "monitoring.serviceMonitor.enabled=true"
	withDashboard = "monitoring.dashboard.enabled=true"
)

// object is a rendered object, decoded as JSON.
type object = map[string]any

// render runs helm template in namespace valkey-operator with the --set values given and
// returns the objects by kind/name.
func render(t *testing.T, sets ...string) map[string]object {
	t.Helper()
	args := []string{"template", "valkey-operator", chartDir(), "-n", "valkey-operator"}
	for _, s := range sets {
		args = append(args, "--set", s)
	}
	out := run(t, helm(t), args...)
	objs := map[string]object{}
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(out), 4096)
	for {
		var o object
		if err := dec.Decode(&o); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("helm template output: %v", err)
		}
		if o == nil {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		objs[o["kind"].(string)+"/"+meta["name"].(string)] = o
	}
	return objs
}

// get walks o by keys and list indexes.
func get(o any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := o.(map[string]any)
			o = m[k]
		case int:
			l, _ := o.([]any)
			if k >= len(l) {
				return nil
			}
			o = l[k]
		}
	}
	return o
}

// TestChartLintsWithMonitoring: helm lint --strict passes with every monitoring object on.
func TestChartLintsWithMonitoring(t *testing.T) {
	for _, sets := range [][]string{nil, {withRule}, {withMonitor}, {withDashboard}, {withRule, withMonitor, withDashboard}} {
		args := []string{"lint", "--strict", chartDir()}
		for _, s := range sets {
			args = append(args, "--set", s)
		}
		out := run(t, helm(t), args...)
		if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
			t.Errorf("helm lint %v reports problems:\n%s", sets, out)
		}
	}
}

// TestMonitoringIsOptIn: the defaults render no monitoring object, and neither does any option
// while metrics.enabled is false (no endpoint: nothing to scrape or alert on).
func TestMonitoringIsOptIn(t *testing.T) {
	monitoring := []string{"PrometheusRule/valkey-operator", "ServiceMonitor/valkey-operator-metrics", "ConfigMap/valkey-operator-dashboard"}
	for _, sets := range [][]string{nil, {withRule, withMonitor, withDashboard, "metrics.enabled=false"}} {
		objs := render(t, sets...)
		for _, key := range monitoring {
			if _, ok := objs[key]; ok {
				t.Errorf("with %v the chart renders %s", sets, key)
			}
		}
	}
	objs := render(t, withRule, withMonitor, withDashboard)
	for _, key := range monitoring {
		if _, ok := objs[key]; !ok {
			t.Errorf("with every option on the chart renders no %s", key)
		}
	}
}

// TestPrometheusRuleIsTheAlertsFile: the PrometheusRule's groups are alerts.yaml's, and it
// carries the labels a ruleSelector matches.
func TestPrometheusRuleIsTheAlertsFile(t *testing.T) {
	objs := render(t, withRule, "monitoring.prometheusRule.labels.release=kube-prometheus-stack")
	pr, ok := objs["PrometheusRule/valkey-operator"]
	if !ok {
		t.Fatal("no PrometheusRule/valkey-operator")
	}
	if pr["apiVersion"] != "monitoring.coreos.com/v1" || get(pr, "metadata", "namespace") != "valkey-operator" {
		t.Errorf("PrometheusRule %v in %v, want monitoring.coreos.com/v1 in valkey-operator", pr["apiVersion"], get(pr, "metadata", "namespace"))
	}
	if get(pr, "metadata", "labels", "release") != "kube-prometheus-stack" || get(pr, "metadata", "labels", "app.kubernetes.io/name") != "valkey-operator" {
		t.Errorf("PrometheusRule labels %v", get(pr, "metadata", "labels"))
	}
	var file map[string]any
	if err := sigsyaml.Unmarshal(readFile(t, alertsPath()), &file); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(get(pr, "spec"), file) {
		got, _ := json.MarshalIndent(get(pr, "spec"), "", "  ")
		t.Errorf("the PrometheusRule's spec is not alerts.yaml:\n%s", got)
	}
}

// TestServiceMonitor: it scrapes the port https of the metrics Service the chart renders, over
// HTTPS with Prometheus's token, keeping the series' own namespace and pod labels.
func TestServiceMonitor(t *testing.T) {
	objs := render(t, withMonitor, "monitoring.serviceMonitor.labels.release=kube-prometheus-stack", "monitoring.serviceMonitor.interval=15s")
	sm, ok := objs["ServiceMonitor/valkey-operator-metrics"]
	if !ok {
		t.Fatal("no ServiceMonitor/valkey-operator-metrics")
	}
	if get(sm, "metadata", "labels", "release") != "kube-prometheus-stack" {
		t.Errorf("ServiceMonitor labels %v", get(sm, "metadata", "labels"))
	}
	svc, ok := objs["Service/valkey-operator-metrics"]
	if !ok {
		t.Fatal("the chart renders no Service/valkey-operator-metrics for the ServiceMonitor")
	}
	for k, v := range get(sm, "spec", "selector", "matchLabels").(map[string]any) {
		if get(svc, "metadata", "labels", k) != v {
			t.Errorf("the ServiceMonitor selects %s=%v, which the Service's labels %v lack", k, v, get(svc, "metadata", "labels"))
		}
	}
	if ns := get(sm, "spec", "namespaceSelector", "matchNames", 0); ns != get(svc, "metadata", "namespace") {
		t.Errorf("the ServiceMonitor looks in namespace %v, the Service is in %v", ns, get(svc, "metadata", "namespace"))
	}
	port := false
	for _, p := range get(svc, "spec", "ports").([]any) {
		port = port || get(p, "name") == "https"
	}
	if !port {
		t.Errorf("the Service has no port named https: %v", get(svc, "spec", "ports"))
	}
	ep := get(sm, "spec", "endpoints", 0)
	for _, c := range []struct {
		path []any
		want any
	}{
		{[]any{"port"}, "https"},
		{[]any{"scheme"}, "https"},
		{[]any{"path"}, "/metrics"},
		{[]any{"interval"}, "15s"},
		{[]any{"honorLabels"}, true},
		{[]any{"bearerTokenFile"}, "/var/run/secrets/kubernetes.io/serviceaccount/token"},
		{[]any{"tlsConfig", "insecureSkipVerify"}, true},
	} {
		if got := get(ep, c.path...); got != c.want {
			t.Errorf("endpoint %v = %v, want %v", c.path, got, c.want)
		}
	}
	objs = render(t, withMonitor, "monitoring.serviceMonitor.authorization.type=Bearer",
		"monitoring.serviceMonitor.authorization.credentials.name=prometheus-token", "monitoring.serviceMonitor.authorization.credentials.key=token")
	ep = get(objs["ServiceMonitor/valkey-operator-metrics"], "spec", "endpoints", 0)
	if get(ep, "authorization", "credentials", "name") != "prometheus-token" || get(ep, "bearerTokenFile") != nil {
		t.Errorf("with authorization set the endpoint is %v, want that authorization and no bearerTokenFile", ep)
	}
}

// TestDashboardConfigMap: the ConfigMap holds dashboard.json unchanged, with the sidecar's label.
func TestDashboardConfigMap(t *testing.T) {
	objs := render(t, withDashboard, "monitoring.dashboard.namespace=monitoring", "monitoring.dashboard.annotations.grafana_folder=Valkey")
	cm, ok := objs["ConfigMap/valkey-operator-dashboard"]
	if !ok {
		t.Fatal("no ConfigMap/valkey-operator-dashboard")
	}
	if get(cm, "metadata", "labels", "grafana_dashboard") != "1" || get(cm, "metadata", "namespace") != "monitoring" ||
		get(cm, "metadata", "annotations", "grafana_folder") != "Valkey" {
		t.Errorf("ConfigMap metadata %v", cm["metadata"])
	}
	got, _ := get(cm, "data", "valkey-operator.json").(string)
	if !bytes.Equal(bytes.TrimSpace([]byte(got)), bytes.TrimSpace(readFile(t, dashboardPath()))) {
		t.Error("the ConfigMap's valkey-operator.json is not chart/files/dashboard.json")
	}
}
