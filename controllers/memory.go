package controllers

import "sync"

// clusterMemory is everything the cluster controller keeps of a cluster from one pass to the
// next besides its connections: what Kubernetes and the nodes cannot tell a later pass (a refusal
// and its back-off, a hold, what was said already). Each memory is keyed by the cluster's
// "namespace/name" and has its own forget; forget drops them all, so a memory added here is
// forgotten with the cluster by adding it to forget, the one place that lists them.
type clusterMemory struct {
	// tls keeps each TLS cluster's client configuration while its Secret stays the same.
	tls tlsConfigs
	// foreign remembers the objects found under a cluster's names that it does not control
	// (ownership.go).
	foreign foreignObjects
	// creates holds back the creation of pods after the API server refused one (creates.go).
	creates createFailures
	// moves holds back zone moves after one found no room (zones.go).
	moves zoneMoveHolds
	// served remembers when each pod's node last served slots (served.go).
	served servedSlots
	// live remembers the live settings set and not yet seen applied, and their refusals
	// (settings.go).
	live liveAttempts
	// holds remembers the held live settings changes already said (held.go).
	holds lastSaid
	// resizes remembers the in-place resizes the API server refused (resize.go).
	resizes resizeRefusals
	// versions is the version of each cluster its last pass ended with (versions.go).
	versions clusterVersions
	// names is what each node knows of the categories and commands roles name (rolenames.go).
	names knownNames
	// rotationsSaid is the rotation phase each cluster's log last said (rotation.go).
	rotationsSaid lastSaid
	// looks keeps each Ready cluster's last quiet pass (look.go; nil, as in unit tests, makes
	// every pass a full one).
	looks quietLooks
}

// forget drops everything kept of the cluster key.
func (m *clusterMemory) forget(key string) {
	m.tls.forget(key)
	m.foreign.forget(key)
	m.creates.forget(key)
	m.moves.forget(key)
	m.served.forget(key)
	m.live.forget(key)
	m.holds.forget(key)
	m.resizes.forget(key)
	m.versions.forget(key)
	m.names.forget(key)
	m.looks.forget(key)
	m.rotationsSaid.forget(key)
}

// lastSaid remembers, per cluster ("namespace/name"), what its log last said of one thing (the
// held live settings change, the rotation phase), so that a line and its Event come once per
// change rather than once per pass. It drives logging only: a restarted operator says a standing
// state once more.
type lastSaid struct {
	mu sync.Mutex
	m  map[string]string
}

// announce reports whether said is new for cluster, and remembers it.
func (l *lastSaid) announce(cluster, said string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil {
		l.m = map[string]string{}
	}
	if l.m[cluster] == said {
		return false
	}
	l.m[cluster] = said
	return true
}

// forget drops what was said about cluster.
func (l *lastSaid) forget(cluster string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.m, cluster)
}
