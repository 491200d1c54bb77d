package install

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gomomento/valkey-operator/tests/harness"
)

// No Docker engine runs here, so the image cannot be built in a test. TestDockerfile checks
// what can break without one noticing: a package of the binary that the build stage does not
// copy (or .dockerignore hides), and the properties the image promises (a static binary, a
// distroless final stage, user 65532).
func TestDockerfile(t *testing.T) {
	lines := strings.Split(string(readFile(t, filepath.Join(harness.RepoRoot(), "Dockerfile"))), "\n")
	var froms, copies []string
	var user, build, entrypoint string
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		switch f[0] {
		case "FROM":
			froms = append(froms, f[1])
		case "COPY":
			if !strings.HasPrefix(f[1], "--from") {
				copies = append(copies, f[1:len(f)-1]...)
			}
		case "USER":
			user = f[1]
		case "RUN":
			if strings.Contains(l, "go build") {
				build = l
			}
		case "ENTRYPOINT":
			entrypoint = strings.Join(f[1:], " ")
		}
	}
	if len(froms) < 2 {
		t.Fatalf("FROM lines %v: want a multi-stage build", froms)
	}
	if final := froms[len(froms)-1]; !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("final stage %s: want distroless static or scratch", final)
	}
	if user != "65532:65532" && user != "65532" {
		t.Errorf("USER %q, want 65532", user)
	}
	if !strings.Contains(build, "CGO_ENABLED=0") {
		t.Errorf("the build %q is not static (CGO_ENABLED=0)", build)
	}
	if entrypoint != `["/valkey-operator"]` {
		t.Errorf("ENTRYPOINT %s", entrypoint)
	}

	// Every package of the binary in this module lies under a copied path and survives
	// .dockerignore's re-inclusions.
	cmd := exec.Command("go", "list", "-deps", "-f", "{{if .Module}}{{if .Module.Main}}{{.Dir}}{{end}}{{end}}", ".")
	cmd.Dir = harness.RepoRoot()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	ignore := strings.Fields(string(readFile(t, filepath.Join(harness.RepoRoot(), ".dockerignore"))))
	for _, dir := range strings.Fields(string(out)) {
		rel, _ := filepath.Rel(harness.RepoRoot(), dir)
		want := "main.go"
		if rel != "." {
			want = strings.SplitN(rel, "/", 2)[0] + "/"
		}
		if !slices.Contains(copies, want) && !slices.Contains(copies, "./") && !slices.Contains(copies, ".") {
			t.Errorf("package %s: the build stage does not COPY %s", rel, want)
		}
		if !slices.Contains(ignore, "!"+want) {
			t.Errorf("package %s: .dockerignore does not re-include %s", rel, want)
		}
	}
}
