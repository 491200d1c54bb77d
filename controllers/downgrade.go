package controllers

import (
	"fmt"

	"github.com/gomomento/valkey-operator/fsm"
	"github.com/gomomento/valkey-operator/version"
)

// A downgrade from Valkey 9 to 8 is the upgrade's roll in reverse (platform-guide/valkey-upgrades.md):
// each shard gets a Valkey 8 replica that syncs from its Valkey 9 primary, is failed over to,
// and the old nodes are replaced. Measured on 8.0.1 and 9.1.2: a 9.1.2 primary sends an 8.0.1
// replica an RDB of the version the replica reads (11), so the full sync works, except for a key
// whose hash fields expire one by one (HEXPIRE, HSETEX, Valkey 9's hash field expiration): the
// primary cannot write it in that version ("Can't store key (db 0) in RDB version 11"), and the
// sync fails again and again. And a replica on 8 skips the commands it does not know in its
// primary's stream (HSETEX, HPEXPIREAT: "This replica is sending an error to its primary"), so a
// copy made while such commands run lacks their writes.
//
// So, while the spec's image is older than 9 and a node still runs 9, a node holding any key
// with expiring fields (INFO keyspace, keys_with_volatile_items) makes the cluster Invalid: before
// the roll replaces anything, and at any pass of the roll (Invalid stops it before its next
// failover, so no copy that lacks those keys is promoted).

// downgradeProblem is why the cluster cannot go on toward image version target, "" when it can.
func downgradeProblem(target string, s fsm.Snapshot) string {
	to := version.Parse(target).Major()
	if to == 0 || to >= 9 {
		return ""
	}
	started := false
	for _, p := range s.Pods {
		if n := p.Node; n != nil && n.Reachable && n.Major() != 0 && n.Major() < 9 {
			started = true
		}
	}
	for _, p := range s.Pods {
		n := p.Node
		if n == nil || !n.Reachable || n.Major() < 9 || n.VolatileItemKeys == 0 {
			continue
		}
		what := "remove the field expirations (HPERSIST) or delete those keys before moving to Valkey " + target + ", or keep Valkey " + n.Version
		if started {
			what = "set the image back to Valkey " + n.Version + " (the nodes already on " + target + " are replaced; their copies may lack writes of Valkey 9's commands), " +
				"then remove the field expirations (HPERSIST) or those keys before moving to Valkey " + target + " again"
		}
		return fmt.Sprintf("Valkey %s to %s: node %s holds %d keys whose hash fields expire (HEXPIRE, HSETEX), which Valkey %s cannot load "+
			"in a full sync nor apply as commands, so no replica on %s could copy them; %s",
			n.Version, target, p.Name, n.VolatileItemKeys, target, target, what)
	}
	return ""
}
