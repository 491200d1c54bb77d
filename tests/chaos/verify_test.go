package chaos

import (
	"bytes"
	"context"
	"encoding/pem"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	v1 "github.com/gomomento/valkey-operator/apis/v1alpha1"
	"github.com/gomomento/valkey-operator/tests/harness"
	"github.com/gomomento/valkey-operator/valkey"
)

// ConvergeBound is how long each cluster may take, from the end of the schedule (the last node
// started, network restored and operator restarted), to reach its final spec. The slowest single
// step measured on this machine is a 4 → 2 reshard of 200 000 keys at load 17 (4 min 46 s,
// README); the writer's keys here are fewer, but the last events may have left a roll, a reshard
// and a replacement's sync running at once on three clusters, on 2 cores shared with tests/e2e.
// Converging later than this is a failure, reported with what was still wrong.
const ConvergeBound = 6 * time.Minute

// waitConverged waits until c converged (converged says "") and returns how long that took, or
// the last problem after bound.
func (r *runner) waitConverged(ctx context.Context, c *target, bound time.Duration) (time.Duration, string) {
	start := time.Now()
	for {
		problem := r.converged(ctx, c)
		if problem == "" {
			return time.Since(start), ""
		}
		if time.Since(start) > bound {
			return time.Since(start), problem
		}
		time.Sleep(time.Second)
	}
}

// converged says what keeps c from its current spec, "" when nothing: the ValkeyCluster is
// Active and Ready for its generation, and Valkey agrees: every slot served once, the shard
// count, the replicas of each shard synced, every node's version, the ACL user's current
// password accepted and the retired ones refused on every node, and every TLS node serving the
// Secret's current certificate.
func (r *runner) converged(ctx context.Context, c *target) string {
	var vc v1.ValkeyCluster
	if err := k8s.Get(ctx, c.key(), &vc); err != nil {
		return err.Error()
	}
	switch {
	case vc.Status.State != v1.StateActive:
		return fmt.Sprintf("state %s: %s", vc.Status.State, vc.Status.Message)
	case vc.Status.ObservedGeneration != vc.Generation:
		return fmt.Sprintf("observedGeneration %d, generation %d", vc.Status.ObservedGeneration, vc.Generation)
	case !meta.IsStatusConditionTrue(vc.Status.Conditions, v1.ConditionReady):
		return "not Ready: " + vc.Status.Message
	}
	spec := c.current()
	pods, err := c.pods(ctx)
	if err != nil {
		return err.Error()
	}
	creds, err := c.creds(ctx, pods)
	if err != nil {
		return err.Error()
	}
	addrs := make([]string, len(pods))
	for i, p := range pods {
		addrs[i] = harness.PodAddr(p)
	}
	if problem := harness.ValkeyHealthy(ctx, addrs, creds, spec.Shards, spec.Replicas); problem != "" {
		return problem
	}
	for _, a := range addrs {
		if v, err := version(ctx, a, creds); err != nil || v != spec.Version {
			return fmt.Sprintf("%s: valkey_version %q (%v), want %s", a, v, err, spec.Version)
		}
	}
	if spec.ACL {
		c.mu.Lock()
		pw, retired := c.password, append([]string(nil), c.retired...)
		c.mu.Unlock()
		if why := authEverywhere(ctx, c, pw, true); why != "" {
			return "current password: " + why
		}
		for _, old := range retired {
			if why := authEverywhere(ctx, c, old, false); why != "" {
				return "retired password: " + why
			}
		}
	}
	if spec.TLS {
		c.mu.Lock()
		block, _ := pem.Decode(c.cert)
		c.mu.Unlock()
		for _, p := range pods {
			got, err := harness.ServedCert(harness.PodAddr(p), harness.PodHost(c.vc, p.Name), c.ca.Roots())
			switch {
			case err != nil:
				return fmt.Sprintf("%s: TLS: %v", p.Name, err)
			case !bytes.Equal(got.Raw, block.Bytes):
				return fmt.Sprintf("%s serves certificate serial %s, not the Secret's current one", p.Name, got.SerialNumber)
			}
		}
	}
	return ""
}

func version(ctx context.Context, addr string, creds valkey.Credentials) (string, error) {
	cl, err := valkey.NewClient(addr, creds)
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	return cl.Version(ctx)
}
