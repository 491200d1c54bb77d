package monitoring

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func dashboardPath() string { return filepath.Join(chartDir(), "files", "dashboard.json") }

// dashboard is as much of a Grafana dashboard as the tests read.
type dashboard struct {
	Title         string  `json:"title"`
	UID           string  `json:"uid"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type panel struct {
	Title   string  `json:"title"`
	Type    string  `json:"type"`
	Panels  []panel `json:"panels"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
	Datasource *struct {
		UID string `json:"uid"`
	} `json:"datasource"`
}

func readDashboard(t *testing.T) dashboard {
	t.Helper()
	var d dashboard
	if err := json.Unmarshal(readFile(t, dashboardPath()), &d); err != nil {
		t.Fatalf("%s is not JSON: %v", dashboardPath(), err)
	}
	return d
}

// panels lists every panel, those in collapsed rows too.
func (d dashboard) panels() []panel {
	var out []panel
	var walk func([]panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			out = append(out, p)
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	return out
}

// grafanaVariables are what Grafana substitutes before it sends a query, and a value for each
// that keeps the query valid PromQL.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "2m", "$__interval", "1m", "$__range", "1h",
	"${namespace}", ".+", "$namespace", ".+", "${cluster}", ".+", "$cluster", ".+",
)

// TestDashboard: the dashboard parses, has the datasource, namespace and cluster variables (the
// latter from valkey_cluster_state), and every panel queries through the datasource variable.
func TestDashboard(t *testing.T) {
	d := readDashboard(t)
	if d.UID == "" || d.Title == "" || d.SchemaVersion < 36 {
		t.Errorf("uid %q, title %q, schemaVersion %d: want a uid, a title and a schema of Grafana 9 or newer", d.UID, d.Title, d.SchemaVersion)
	}
	vars := map[string]string{}
	for _, v := range d.Templating.List {
		q, _ := v.Query.(string)
		if m, ok := v.Query.(map[string]any); ok {
			q, _ = m["query"].(string)
		}
		vars[v.Name] = v.Type + " " + q
	}
	for name, want := range map[string]string{
		"datasource": "datasource prometheus",
		"namespace":  "query label_values(valkey_cluster_state, namespace)",
		"cluster":    `query label_values(valkey_cluster_state{namespace=~"$namespace"}, cluster)`,
	} {
		if vars[name] != want {
			t.Errorf("variable %s is %q, want %q", name, vars[name], want)
		}
	}
	titles := map[string]bool{}
	for _, p := range d.panels() {
		titles[p.Title] = true
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != "${datasource}" {
			t.Errorf("panel %q does not query through the datasource variable", p.Title)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
	}
	for _, title := range []string{"State", "Ready", "Nodes wanted and ready", "Slots served", "Failovers by kind",
		"Failover recovery time", "Shards that lost their data", "Slot moves", "Nodes outdated (roll progress)",
		"Memory used vs maxmemory", "Connected clients", "Commands per second", "Hit ratio", "Evictions and expirations",
		"Replication lag", "Replication link and node up", "Certificate expires in", "Reconciles per second",
		"Reconcile errors per second", "Reconcile latency", "Workqueue depth and active workers"} {
		if !titles[title] {
			t.Errorf("no panel %q", title)
		}
	}
}

// TestDashboardQueriesExistingMetrics: every query of every panel and variable names only metrics
// that exist, and promtool parses every panel's query (Grafana's variables substituted).
func TestDashboardQueriesExistingMetrics(t *testing.T) {
	d := readDashboard(t)
	known := knownNames(t)
	var exprs []string
	for _, p := range d.panels() {
		for i, target := range p.Targets {
			where := fmt.Sprintf("panel %q, query %d", p.Title, i)
			if target.Expr == "" {
				t.Errorf("%s is empty", where)
				continue
			}
			checkNames(t, where, target.Expr, known)
			exprs = append(exprs, grafanaVariables.Replace(target.Expr))
		}
	}
	labelValues := regexp.MustCompile(`^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q, _ := v.Query.(map[string]any)
		s, _ := q["query"].(string)
		m := labelValues.FindStringSubmatch(s)
		if m == nil || !nameKnown(m[1], known) {
			t.Errorf("variable %s: %q is not label_values of a metric that exists", v.Name, s)
		}
	}
	out := run(t, promtool(t), "check", "rules", writeRules(t, exprs))
	if !strings.Contains(out, "SUCCESS") {
		t.Fatalf("promtool check rules of the dashboard's queries:\n%s", out)
	}
}

// writeRules writes exprs as recording rules into a rule file in a temporary directory, for
// promtool to parse (the dashboard's queries).
func writeRules(t *testing.T, exprs []string) string {
	t.Helper()
	f := ruleFile{Groups: []ruleGroup{{Name: "exprs"}}}
	for i, e := range exprs {
		f.Groups[0].Rules = append(f.Groups[0].Rules, rule{Record: fmt.Sprintf("expr:%d", i), Expr: e})
	}
	b, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "exprs.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
