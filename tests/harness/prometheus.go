package harness

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// PrometheusBinary is the Prometheus server hack/build-prometheus.sh builds (`make prometheus`):
// $PROMETHEUS, else ~/.cache/valkey-operator/bin/prometheus.
func PrometheusBinary() string {
	if p := os.Getenv("PROMETHEUS"); p != "" {
		return p
	}
	home, _ := os.UserHomeDir()
	return filepath.Join(home, ".cache", "valkey-operator", "bin", "prometheus")
}

// Prometheus is a real Prometheus server scraping an operator's metrics endpoint, as a platform
// team's would: over HTTPS, with a bearer token Kubernetes authenticates.
type Prometheus struct {
	// URL is its HTTP API and UI (http://127.0.0.1:<port>).
	URL string
	cmd *exec.Cmd
}

// StartPrometheus runs Prometheus in dir, scraping the metrics endpoint at target (host:port)
// every interval as job valkey-operator-metrics with token, and waits until it is ready.
func StartPrometheus(ctx context.Context, dir, target, token string, interval time.Duration) (*Prometheus, error) {
	bin := PrometheusBinary()
	if _, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("prometheus: %w (make prometheus builds it)", err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		return nil, err
	}
	tokenFile := filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte(token), 0o600); err != nil {
		return nil, err
	}
	// The operator serves a self-signed certificate unless one is mounted: the scrape checks who
	// it talks to by the token's round trip, not the certificate.
	config := fmt.Sprintf(`global:
  scrape_interval: %[1]s
  evaluation_interval: %[1]s
scrape_configs:
- job_name: valkey-operator-metrics
  scheme: https
  tls_config:
    insecure_skip_verify: true
  authorization:
    credentials_file: %[2]s
  static_configs:
  - targets: ["%[3]s"]
`, interval, tokenFile, target)
	cfgFile := filepath.Join(dir, "prometheus.yml")
	if err := os.WriteFile(cfgFile, []byte(config), 0o644); err != nil {
		return nil, err
	}
	addr, err := freeLoopback()
	if err != nil {
		return nil, err
	}
	out, err := os.Create(filepath.Join(dir, "prometheus.log"))
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "--config.file="+cfgFile, "--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+addr)
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Prometheus{URL: "http://" + addr, cmd: cmd}
	for {
		if resp, err := http.Get(p.URL + "/-/ready"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("prometheus not ready (log: %s): %w", out.Name(), ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Stop ends the server.
func (p *Prometheus) Stop() {
	if p != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		_ = p.cmd.Wait()
	}
}

// Sample is one series of an instant query's result.
type Sample struct {
	Metric map[string]string
	Value  float64
}

// Query runs an instant PromQL query through the HTTP API.
func (p *Prometheus) Query(ctx context.Context, promql string) ([]Sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.URL+"/api/v1/query?query="+url.QueryEscape(promql), nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	var body struct {
		Status string `json:"status"`
		Error  string `json:"error"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %w", promql, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s", promql, body.Error)
	}
	var out []Sample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value %v", promql, r.Value[1])
		}
		out = append(out, Sample{Metric: r.Metric, Value: v})
	}
	return out, nil
}

// MetricsReaderToken binds ServiceAccount prometheus of namespace monitoring to the ClusterRole
// valkey-operator-metrics-reader as manifests/operator.yaml ships it (creating all three if
// missing), and returns a token of it valid for an hour: what a platform's Prometheus scrapes
// the operator with.
func MetricsReaderToken(ctx context.Context, c client.Client) (string, error) {
	raw, err := os.ReadFile(filepath.Join(RepoRoot(), "manifests", "operator.yaml"))
	if err != nil {
		return "", err
	}
	var reader *rbacv1.ClusterRole
	dec := yaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
	for {
		var obj rbacv1.ClusterRole
		if err := dec.Decode(&obj); err != nil {
			break
		}
		if obj.Kind == "ClusterRole" && obj.Name == "valkey-operator-metrics-reader" {
			reader = &obj
		}
	}
	if reader == nil {
		return "", errors.New("manifests/operator.yaml ships no ClusterRole valkey-operator-metrics-reader")
	}
	const ns = "monitoring"
	if err := EnsureNamespace(ctx, c, ns); err != nil {
		return "", err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: ns}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "prometheus-valkey-operator-metrics"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: sa.Name, Namespace: ns}}}
	for _, o := range []client.Object{reader, sa, binding} {
		if err := c.Create(ctx, o); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", err
		}
	}
	hour := int64(3600)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", err
	}
	return tr.Status.Token, nil
}
