package monitoring

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/gomomento/valkey-operator/metrics"
)

// controllerRuntimeMetric is a metric the operator's endpoint serves because controller-runtime
// (or the client_golang collectors it registers) does, found in the pinned module's source.
type controllerRuntimeMetric struct {
	name      string
	histogram bool
	// file and literal: where the name (or, for names built from a subsystem and a key, its
	// last part) is spelled in the module that registers it.
	module, file, literal string
}

const (
	crModule = "sigs.k8s.io/controller-runtime"
	cgModule = "github.com/prometheus/client_golang"
)

// controllerRuntimeMetrics are the names the rules and the dashboard may use besides package
// metrics', checked against controller-runtime v0.25.2 (TestControllerRuntimeMetricsExist reads
// the source of whatever version go.mod pins, so an upgrade that renames one fails here).
var controllerRuntimeMetrics = []controllerRuntimeMetric{
	// pkg/internal/controller/metrics/metrics.go, registered in its init(); label controller
	// (and result for the total: success, error, requeue, requeue_after).
	{name: "controller_runtime_reconcile_total", module: crModule, file: "pkg/internal/controller/metrics/metrics.go", literal: `"controller_runtime_reconcile_total"`},
	{name: "controller_runtime_reconcile_errors_total", module: crModule, file: "pkg/internal/controller/metrics/metrics.go", literal: `"controller_runtime_reconcile_errors_total"`},
	{name: "controller_runtime_reconcile_panics_total", module: crModule, file: "pkg/internal/controller/metrics/metrics.go", literal: `"controller_runtime_reconcile_panics_total"`},
	{name: "controller_runtime_reconcile_time_seconds", histogram: true, module: crModule, file: "pkg/internal/controller/metrics/metrics.go", literal: `"controller_runtime_reconcile_time_seconds"`},
	{name: "controller_runtime_active_workers", module: crModule, file: "pkg/internal/controller/metrics/metrics.go", literal: `"controller_runtime_active_workers"`},
	{name: "controller_runtime_max_concurrent_reconciles", module: crModule, file: "pkg/internal/controller/metrics/metrics.go", literal: `"controller_runtime_max_concurrent_reconciles"`},
	// pkg/internal/metrics/workqueue.go: Subsystem "workqueue" and the keys of
	// pkg/metrics/workqueue.go; labels name (the controller's name) and controller.
	{name: "workqueue_depth", module: crModule, file: "pkg/metrics/workqueue.go", literal: `DepthKey                   = "depth"`},
	{name: "workqueue_adds_total", module: crModule, file: "pkg/metrics/workqueue.go", literal: `AddsKey                    = "adds_total"`},
	{name: "workqueue_retries_total", module: crModule, file: "pkg/metrics/workqueue.go", literal: `RetriesKey                 = "retries_total"`},
	{name: "workqueue_queue_duration_seconds", histogram: true, module: crModule, file: "pkg/metrics/workqueue.go", literal: `QueueLatencyKey            = "queue_duration_seconds"`},
	{name: "workqueue_work_duration_seconds", histogram: true, module: crModule, file: "pkg/metrics/workqueue.go", literal: `WorkDurationKey            = "work_duration_seconds"`},
	// pkg/metrics/leaderelection.go; label name (the Lease: valkey-operator.valkey.gomomento.com).
	{name: "leader_election_master_status", module: crModule, file: "pkg/metrics/leaderelection.go", literal: `"leader_election_master_status"`},
	// client_golang's process collector, which pkg/internal/controller/metrics registers.
	{name: "process_cpu_seconds_total", module: cgModule, file: "prometheus/process_collector.go", literal: `"process_cpu_seconds_total"`},
	{name: "process_resident_memory_bytes", module: cgModule, file: "prometheus/process_collector.go", literal: `"process_resident_memory_bytes"`},
}

// prometheusNames are series Prometheus makes itself for every target.
var prometheusNames = []string{"up"}

// knownNames maps every metric name the rules and the dashboard may query to whether it is a
// histogram (whose _bucket, _sum and _count series are queried).
func knownNames(t *testing.T) map[string]bool {
	t.Helper()
	known := map[string]bool{}
	for _, n := range metrics.Names() {
		known[n] = false
	}
	// Which of package metrics' names are histograms: ask the Collector what it sends for a
	// cluster (every cluster has the recovery histogram).
	reg := prometheus.NewPedanticRegistry()
	r := metrics.New()
	reg.MustRegister(r)
	r.Observe(metrics.Cluster{Namespace: "ns", Name: "c", State: "Active"})
	families, err := reg.Gather()
	if err != nil {
		t.Fatalf("gathering package metrics: %v", err)
	}
	for _, f := range families {
		if _, ok := known[f.GetName()]; !ok {
			t.Errorf("package metrics sends %s, which metrics.Names() does not list", f.GetName())
		}
		if f.GetType().String() == "HISTOGRAM" {
			known[f.GetName()] = true
		}
	}
	for _, m := range controllerRuntimeMetrics {
		known[m.name] = m.histogram
	}
	for _, n := range prometheusNames {
		known[n] = false
	}
	return known
}

// TestControllerRuntimeMetricsExist: every name of controllerRuntimeMetrics is spelled where the
// list says, in the module version go.mod pins.
func TestControllerRuntimeMetricsExist(t *testing.T) {
	dirs := map[string]string{}
	for _, m := range controllerRuntimeMetrics {
		dir, ok := dirs[m.module]
		if !ok {
			cmd := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", m.module)
			cmd.Dir = repoRoot()
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -m %s: %v", m.module, err)
			}
			dir = strings.TrimSpace(string(out))
			dirs[m.module] = dir
		}
		src := string(readFile(t, filepath.Join(dir, m.file)))
		if !strings.Contains(src, m.literal) {
			t.Errorf("%s: %s does not contain %s any more: is %s still exported?", m.module, m.file, m.literal, m.name)
		}
	}
}

// checkNames fails for each metric of expr that is not known.
func checkNames(t *testing.T, where, expr string, known map[string]bool) {
	t.Helper()
	names, err := metricNames(expr)
	if err != nil {
		t.Errorf("%s: %v", where, err)
		return
	}
	if len(names) == 0 {
		t.Errorf("%s queries no metric: %s", where, expr)
	}
	for _, n := range names {
		if !nameKnown(n, known) {
			t.Errorf("%s queries %s, which neither the operator (metrics.Names()) nor controller-runtime exports:\n%s", where, n, expr)
		}
	}
}

func nameKnown(n string, known map[string]bool) bool {
	if _, ok := known[n]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(n, suffix); ok && known[base] {
			return true
		}
	}
	return false
}

// Words of PromQL that are not metric names where they stand without a parenthesis after them:
// binary operators and modifiers, and the aggregations, which may have by or without between
// themselves and their parenthesis.
var promqlKeywords = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring",
	"group_left", "group_right", "inf", "nan", "atan2",
	"sum", "min", "max", "avg", "group", "stddev", "stdvar", "count", "count_values", "bottomk", "topk",
	"quantile", "limitk", "limit_ratio"}

// Keywords followed by a list of label names in parentheses.
var labelListKeywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right"}

// metricNames lists the metric names of expr's selectors: identifiers that are not functions,
// aggregations, keywords, label names (in {} matchers and grouping lists), strings, numbers or
// durations. A small lexer rather than Prometheus's parser, which the operator's module does
// not depend on; promtool parses every expression for real (check rules).
func metricNames(expr string) ([]string, error) {
	var names []string
	s := expr
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			end := strings.IndexByte(s[i+1:], c)
			for c != '`' && end >= 0 && strings.HasSuffix(s[i+1:i+1+end], `\`) { // escaped quote
				next := strings.IndexByte(s[i+2+end:], c)
				if next < 0 {
					end = -1
					break
				}
				end += 1 + next
			}
			if end < 0 {
				return nil, fmt.Errorf("unterminated string in %q", expr)
			}
			i += end + 2
		case c == '{' || c == '[':
			closing := map[byte]byte{'{': '}', '[': ']'}[c]
			end, err := skipTo(s, i+1, closing)
			if err != nil {
				return nil, fmt.Errorf("%w in %q", err, expr)
			}
			i = end + 1
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isWord(s[i]) || s[i] == '.') {
				i++
			}
		case isWordStart(c):
			j := i
			for j < len(s) && isWord(s[j]) {
				j++
			}
			word := s[i:j]
			k := j
			for k < len(s) && (s[k] == ' ' || s[k] == '\n' || s[k] == '\t') {
				k++
			}
			paren := k < len(s) && s[k] == '('
			switch {
			case paren && slices.Contains(labelListKeywords, word):
				end, err := skipTo(s, k+1, ')')
				if err != nil {
					return nil, fmt.Errorf("%w in %q", err, expr)
				}
				j = end + 1
			case paren, slices.Contains(promqlKeywords, word):
			default:
				names = append(names, word)
			}
			i = j
		default:
			i++
		}
	}
	sort.Strings(names)
	return slices.Compact(names), nil
}

// skipTo returns the index of the closing byte that ends the group opened before from; strings
// inside are skipped.
func skipTo(s string, from int, closing byte) (int, error) {
	var quote byte
	for i := from; i < len(s); i++ {
		switch {
		case quote != 0 && s[i] == '\\':
			i++
		case quote != 0 && s[i] == quote:
			quote = 0
		case quote != 0:
		case s[i] == '"' || s[i] == '\'' || s[i] == '`':
			quote = s[i]
		case s[i] == closing:
			return i, nil
		}
	}
	return 0, fmt.Errorf("no closing %c", closing)
}

func isWordStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}
func isWord(c byte) bool { return isWordStart(c) || c >= '0' && c <= '9' }

func TestMetricNames(t *testing.T) {
	for _, c := range []struct {
		expr string
		want []string
	}{
		{`up{job="x"} == 0`, []string{"up"}},
		{`absent(up{job="valkey-operator-metrics"})`, []string{"up"}},
		{`sum by (cluster, kind) (increase(valkey_cluster_failovers_total{kind="takeover", cluster=~"a|b"}[5m]))`, []string{"valkey_cluster_failovers_total"}},
		{`a and on(namespace, cluster) b == 0 unless on (namespace) c{state="Upgrading"} == 1`, []string{"a", "b", "c"}},
		{`x - time() < 14 * 86400 and x offset 15m >= 2e3`, []string{"x"}},
		{`histogram_quantile(0.99, sum by (le) (rate(h_bucket{l="}"}[1h:5m])))`, []string{"h_bucket"}},
		{`a / on(pod) group_left(role) b * inf`, []string{"a", "b"}},
		{`sum without (instance) (rate(c{l='it\'s'}[$__rate_interval]))`, []string{"c"}},
		{`1 + 2`, nil},
	} {
		got, err := metricNames(c.expr)
		if err != nil {
			t.Errorf("%s: %v", c.expr, err)
			continue
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("metricNames(%s) = %v, want %v", c.expr, got, c.want)
		}
	}
	if _, err := metricNames(`sum(x{a="b"`); err == nil {
		t.Error("an unclosed matcher is not an error")
	}
}
