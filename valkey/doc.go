// Package valkey is the operator's only door to Valkey nodes.
//
// It has two layers. The pure layer (nodes.go, info.go, slots.go) parses what
// Valkey prints; it performs no I/O and does not import valkey-go. Slot
// arithmetic is package slot's, the one slot model shared with the planners. The
// I/O layer (client.go, observe.go) talks to exactly one node per Client over
// valkey-go, without cluster routing: the operator addresses nodes, not keys,
// and must be able to talk to a node that is not yet part of any cluster.
//
// Valkey still prints "master" and "slave" in CLUSTER NODES and INFO; the Go
// API speaks of primaries and replicas, and ParseClusterNodes translates.
package valkey
