package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// A refused creation holds every creation of its cluster back for 1 s, doubling per refusal up to
// 5 min; a pod created, or another generation of the spec, ends the back-off; clusters are apart.
func TestCreateBackoff(t *testing.T) {
	var c createFailures
	t0 := time.Unix(1000, 0)
	r := createRefused{Pod: "vc-12345", Reason: "exceeded quota"}
	var got []time.Duration
	for range 12 {
		got = append(got, c.failed("ns/a", 1, r, t0))
	}
	want := []time.Duration{1, 2, 4, 8, 16, 32, 64, 128, 256, 300, 300, 300}
	for i := range want {
		if got[i] != want[i]*time.Second {
			t.Fatalf("back-offs %v, want %v seconds", got, want)
		}
	}
	msg, held, wait := c.state("ns/a", 1, t0.Add(100*time.Second))
	if !held || wait != 200*time.Second || !strings.Contains(msg, "pod vc-12345 could not be created: exceeded quota; retrying in 3m20s") {
		t.Fatalf("state %q held %v wait %s", msg, held, wait)
	}
	if msg, held, _ := c.state("ns/a", 1, t0.Add(time.Hour)); held || !strings.Contains(msg, "exceeded quota") {
		t.Fatalf("after the back-off: %q held %v; the refusal stays said until a pod is created", msg, held)
	}
	if _, held, _ := c.state("ns/b", 1, t0); held {
		t.Fatal("another cluster is held back")
	}
	if msg, held, _ := c.state("ns/a", 2, t0); held || msg != "" {
		t.Fatal("a change of the spec keeps the back-off")
	}
	if d := c.failed("ns/a", 2, r, t0); d != time.Second {
		t.Fatalf("after a spec change, first back-off %s", d)
	}
	c.succeeded("ns/a")
	if msg, held, _ := c.state("ns/a", 2, t0); held || msg != "" {
		t.Fatal("a created pod keeps the back-off")
	}
}

// The API server's reason is quoted, bounded; a pass out of time is not a refusal.
func TestRefusal(t *testing.T) {
	quota := apierrors.NewForbidden(schema.GroupResource{Resource: "pods"}, "vc-1", errors.New("exceeded quota: q, requested: pods=1, used: pods=0, limited: pods=0"))
	var cr *createRefused
	if err := refusal("vc-1", quota); !errors.As(err, &cr) || !strings.Contains(cr.Reason, "exceeded quota") || cr.Pod != "vc-1" {
		t.Fatalf("refusal %v", err)
	}
	long := refusal("vc-1", errors.New(strings.Repeat("x", 5000)))
	if !errors.As(long, &cr) || len(cr.Reason) > maxRefusalLength+len("…") {
		t.Fatalf("reason of %d bytes", len(cr.Reason))
	}
	if err := refusal("vc-1", fmt.Errorf("create: %w", context.DeadlineExceeded)); errors.As(err, &cr) {
		t.Fatal("a deadline is a refusal")
	}
}

// CLUSTER FAILOVER sent to a node that is already a primary (Valkey 9 handed a drained primary's
// slots over on SIGTERM first) is a handover done, not an error to say at WARN.
func TestAlreadyPrimary(t *testing.T) {
	if !alreadyPrimary(errors.New("cluster failover on 10.244.0.24:6379: ERR You should send CLUSTER FAILOVER to a replica")) {
		t.Fatal("the refusal of a primary is not recognised")
	}
	if alreadyPrimary(nil) || alreadyPrimary(errors.New("ERR Master is down or failed, please use CLUSTER FAILOVER FORCE")) {
		t.Fatal("another error taken for a primary's refusal")
	}
}
