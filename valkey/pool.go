package valkey

import (
	"context"
	"fmt"
	"crypto/tls"
	"slices"
	"sync"
)

// Pool keeps one Client per node open across reconciles, keyed by cluster, address and
// credentials, so a pass does not dial and authenticate every node again. A Client is closed
// when its node leaves the set a cluster retains (pod gone, failed or given another IP), when
// the credentials it was opened with change, and when the cluster is forgotten (deleted).
// The zero value is ready to use; safe for concurrent use.
//
// Passes of one cluster never overlap (controller-runtime runs one at a time per object), so
// the only concurrency within a cluster is one pass's own parallel queries.
type Pool struct {
	mu       sync.Mutex
	clusters map[string]map[string]*pooled // cluster -> address -> client
	// dial opens a Client; NewClient unless a test replaces it.
	dial func(addr string, creds Credentials) (*Client, error)
}

type pooled struct {
	c          *Client
	username   string
	password   string
	tls        *tls.Config
	serverName string
}

// matches reports whether the Client was opened with creds for addr. The TLS configuration is
// compared by identity: a caller keeps one per cluster while its certificates stay the same.
func (p *pooled) matches(addr string, creds Credentials) bool {
	return p.username == creds.Username && p.password == creds.Password && p.tls == creds.TLS && p.serverName == creds.serverName(addr)
}

// Client returns the open Client for addr in cluster, dialling one when there is none or when
// the one there was opened with other credentials (which it then closes).
func (p *Pool) Client(cluster, addr string, creds Credentials) (*Client, error) {
	p.mu.Lock()
	if e, ok := p.clusters[cluster][addr]; ok {
		if e.matches(addr, creds) {
			p.mu.Unlock()
			return e.c, nil
		}
		delete(p.clusters[cluster], addr)
		e.c.Close()
	}
	dial := p.dial
	p.mu.Unlock()
	if dial == nil {
		dial = NewClient
	}
	// Dial outside the lock: other clusters' passes must not wait on this node.
	c, err := dial(addr, creds)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.clusters[cluster][addr]; ok && e.matches(addr, creds) {
		// The same pass asked twice at once (a duplicate address): keep the first.
		c.Close()
		return e.c, nil
	}
	if p.clusters == nil {
		p.clusters = map[string]map[string]*pooled{}
	}
	if p.clusters[cluster] == nil {
		p.clusters[cluster] = map[string]*pooled{}
	}
	p.clusters[cluster][addr] = &pooled{c: c, username: creds.Username, password: creds.Password, tls: creds.TLS, serverName: creds.serverName(addr)}
	return c, nil
}

// Retain closes every Client of cluster whose address is not in addrs: the nodes that left.
func (p *Pool) Retain(cluster string, addrs []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, e := range p.clusters[cluster] {
		if !slices.Contains(addrs, addr) {
			delete(p.clusters[cluster], addr)
			e.c.Close()
		}
	}
	if len(p.clusters[cluster]) == 0 {
		delete(p.clusters, cluster)
	}
}

// Forget closes every Client of cluster.
func (p *Pool) Forget(cluster string) { p.Retain(cluster, nil) }

// Len is the number of open Clients of cluster.
func (p *Pool) Len(cluster string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clusters[cluster])
}

// Observe is the package's Observe over the pool's Clients: one NodeView per address, in order,
// each with its own outcome. A Client whose query failed on the connection is closed, so the
// next pass dials afresh rather than queue behind a node that stopped answering.
func (p *Pool) Observe(ctx context.Context, cluster string, addrs []string, creds Credentials) []NodeView {
	views := make([]NodeView, len(addrs))
	var wg sync.WaitGroup
	for i, addr := range addrs {
		wg.Go(func() {
			defer func() {
				// A reply the client cannot read (a pod that only claims to be a node, a broken
				// server) must cost that node's view, not the process: the panic of a goroutine
				// the operator starts is not recovered by controller-runtime, and one bad node
				// would stop the operator for every cluster.
				if r := recover(); r != nil {
					views[i] = NodeView{Addr: addr, Err: fmt.Errorf("observe %s: unreadable reply: %v", addr, r)}
					p.dropAddr(cluster, addr)
				}
			}()
			v := NodeView{Addr: addr}
			if err := ctx.Err(); err != nil {
				v.Err = err
				views[i] = v
				return
			}
			c, err := p.Client(cluster, addr, creds)
			if err != nil {
				v.Err = err
				views[i] = v
				return
			}
			views[i] = observeWith(ctx, c, v)
			if !views[i].Reachable && !IsServerError(views[i].Err) {
				p.drop(cluster, addr, c)
			}
		})
	}
	wg.Wait()
	return views
}

// dropAddr closes and removes the pool's Client for addr, whichever it is.
func (p *Pool) dropAddr(cluster, addr string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.clusters[cluster][addr]; ok {
		delete(p.clusters[cluster], addr)
		e.c.Close()
	}
}

// drop closes c and removes it, if it is still the pool's Client for addr.
func (p *Pool) drop(cluster, addr string, c *Client) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if e, ok := p.clusters[cluster][addr]; ok && e.c == c {
		delete(p.clusters[cluster], addr)
		c.Close()
	}
}
