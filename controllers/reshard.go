package controllers

import (
	"github.com/gomomento/valkey-operator/valkey"
	"github.com/gomomento/valkey-operator/valkey/mover"
)

// slotMover is the mover (package valkey/mover) of one pass: it reaches the cluster's nodes by
// their pods' IPs as observed, with the pass's clients (node), and opens a node's connections
// for a batch within the pool its maxclients allows (mover.PoolFor). creds are the operator's,
// migrate acl.MigrationUser's.
func (r *ValkeyClusterReconciler) slotMover(obs *observation, node func(string) (*valkey.Client, error), creds, migrate valkey.Credentials) mover.Mover {
	return mover.Mover{
		Nodes: mover.Nodes{
			Client: node,
			IP: func(pod string) string {
				if p, ok := obs.pods[pod]; ok {
					return p.Status.PodIP
				}
				return ""
			},
			Pool: func(pod string) int {
				vn, ok := obs.nodes[pod]
				if !ok || vn == nil {
					return mover.PoolFor(0)
				}
				n, _ := parseMaxclients(vn.Spec.ValkeySettings["maxclients"])
				return mover.PoolFor(n)
			},
		},
		Dial:      r.conns.Dial,
		Migration: migrate,
		Control:   creds,
	}
}
