package valkey

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/gomomento/valkey-operator/logging"
)

// Pool keeps one Client per node open across reconciles, keyed by cluster, address and
// credentials, so a pass does not dial and authenticate every node again. A Client is closed
// when its node leaves the set a cluster retains (pod gone, failed or given another IP), when
// the credentials it was opened with change, and when the cluster is forgotten (deleted).
// The zero value is ready to use; safe for concurrent use.
//
// Passes of one cluster never overlap (controller-runtime runs one at a time per object), but a
// node's observation can outlive the pass that started it (see Observe): at most one per node
// is in flight, and the next pass waits on it rather than start another.
type Pool struct {
	mu       sync.Mutex
	clusters map[string]map[string]*pooled // cluster -> address -> client
	// silent are the addresses whose last observation got no answer: cluster -> address.
	silent map[string]map[string]bool
	// inflight are the observations still running: cluster -> address.
	inflight map[string]map[string]*attempt
	// gen counts each cluster's Forgets: a dial or an observation that completes after the
	// cluster was forgotten leaves nothing behind.
	gen map[string]uint64
	// dial opens a Client; Dial.NewClient unless a test replaces it.
	dial func(addr string, creds Credentials) (*Client, error)
	// Dial opens the connections of the pool's Clients (nil: TCP). Set before first use.
	Dial Dialer
	// MaxReply bounds what one reply to the pool's Clients may cost (reply.go; 0: MaxReply), for
	// a caller whose replies are known to be smaller. Set before first use.
	MaxReply int64
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
	gen := p.gen[cluster]
	p.mu.Unlock()
	return p.client(cluster, addr, creds, gen)
}

// client is Client for a caller that began in generation gen of cluster: a Client dialled after
// the cluster was forgotten since is closed, not kept.
func (p *Pool) client(cluster, addr string, creds Credentials, gen uint64) (*Client, error) {
	p.mu.Lock()
	if e, ok := p.clusters[cluster][addr]; ok {
		if e.matches(addr, creds) {
			p.mu.Unlock()
			return e.c, nil
		}
		delete(p.clusters[cluster], addr)
		defer e.c.Close() // after the lock is released, below
	}
	dial := p.dial
	p.mu.Unlock()
	if dial == nil {
		max := p.MaxReply
		if max <= 0 {
			max = MaxReply
		}
		dial = func(addr string, creds Credentials) (*Client, error) { return p.Dial.NewLimitedClient(addr, creds, max) }
	}
	// Dial outside the lock: other clusters' passes must not wait on this node.
	c, err := dial(addr, creds)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.gen[cluster] != gen {
		c.Close()
		return nil, fmt.Errorf("connect %s: the cluster was forgotten meanwhile", addr)
	}
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
	var gone []*Client
	defer func() {
		for _, c := range gone {
			c.Close() // after the lock is released: closing a connection to a silent node can take a while
		}
	}()
	p.mu.Lock()
	defer p.mu.Unlock()
	for addr, e := range p.clusters[cluster] {
		if !slices.Contains(addrs, addr) {
			delete(p.clusters[cluster], addr)
			gone = append(gone, e.c)
		}
	}
	if len(p.clusters[cluster]) == 0 {
		delete(p.clusters, cluster)
	}
	for addr := range p.silent[cluster] {
		if !slices.Contains(addrs, addr) {
			p.markSilent(cluster, addr, false)
		}
	}
}

// Forget closes every Client of cluster.
func (p *Pool) Forget(cluster string) {
	p.mu.Lock()
	if p.gen == nil {
		p.gen = map[string]uint64{}
	}
	p.gen[cluster]++
	delete(p.silent, cluster)
	p.mu.Unlock()
	p.Retain(cluster, nil)
}

// Len is the number of open Clients of cluster.
func (p *Pool) Len(cluster string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.clusters[cluster])
}

// How long one observation waits for a node. A pass decides from the views of the nodes that
// answered, so a node that does not answer must not hold the decision back: a cut of two of
// three primaries is ended only by the operator's TAKEOVER, issued from the first pass that
// reads the reachable nodes' failure flags (cluster-node-timeout after the cut), and a pass that
// waited CommandTimeout (5 s) on each cut node issued it 2–5 s late.
const (
	// ObserveTimeout bounds the wait for a node that answered its last observation: its three
	// queries take milliseconds over the pooled connection, so a node silent for a second is
	// looked at again by the next pass, a second later, rather than waited for.
	ObserveTimeout = time.Second
	// A node that did not answer its last observation is waited for silentFactor times what the
	// answering nodes needed, at least silentGrace, at most ObserveTimeout, from the start of the
	// observation. A node cut off the network then does not hold the pass beyond what its peers
	// show the machine needs; a node that is only slow answers its observation late, which
	// clears the mark, and the pass after waits for it in full again.
	silentGrace  = 200 * time.Millisecond
	silentFactor = 4
	// RedialWithin bounds the second try of an observation whose pooled connection the node
	// had closed (observeOne): a dial and the queries of a node that is up.
	RedialWithin = 300 * time.Millisecond
)

// attempt is one node's observation, which may outlive the pass that started it.
type attempt struct {
	done chan struct{}
	view NodeView // set before done is closed
}

// Observe is the package's Observe over the pool's Clients: one NodeView per address, in order,
// each with its own outcome. It waits at most ObserveTimeout (or ctx) for a node, less for a
// node silent last time (silentGrace); a node not waited for is reported unreachable ("no answer
// within …"), and its observation goes on without the pass, up to CommandTimeout: its outcome is
// the node's record for the next pass (an answer clears the silent mark, keeps the Client, and
// is not asked again while it runs: the next pass waits on it). A Client whose query failed on
// the connection is closed, so the next pass dials afresh rather than queue behind a node that
// stopped answering.
func (p *Pool) Observe(ctx context.Context, cluster string, addrs []string, creds Credentials) []NodeView {
	start := time.Now()
	ctx, cancel := context.WithTimeout(ctx, ObserveTimeout)
	defer cancel()
	atts := make([]*attempt, len(addrs))
	silent := make([]bool, len(addrs))
	expected := 0
	p.mu.Lock()
	gen := p.gen[cluster]
	for i, addr := range addrs {
		silent[i] = p.silent[cluster][addr]
		if !silent[i] {
			expected++
		}
		if a := p.inflight[cluster][addr]; a != nil {
			atts[i] = a
			continue
		}
		a := &attempt{done: make(chan struct{})}
		if p.inflight == nil {
			p.inflight = map[string]map[string]*attempt{}
		}
		if p.inflight[cluster] == nil {
			p.inflight[cluster] = map[string]*attempt{}
		}
		p.inflight[cluster][addr] = a
		atts[i] = a
		go p.run(ctx, cluster, addr, creds, gen, a)
	}
	p.mu.Unlock()

	// One waiter per node turns its attempt's end into an index on answers; stop releases the
	// waiters of the nodes not waited for.
	answers := make(chan int, len(addrs))
	stop := make(chan struct{})
	defer close(stop)
	for i, a := range atts {
		go func() {
			select {
			case <-a.done:
				answers <- i
			case <-stop:
			}
		}()
	}
	views := make([]NodeView, len(addrs))
	got := make([]bool, len(addrs))
	pending, slowest := len(addrs), time.Duration(0)
	receive := func(i int) {
		views[i], got[i] = atts[i].view, true
		views[i].Addr = addrs[i]
		pending--
		if !silent[i] {
			expected--
			slowest = max(slowest, time.Since(start))
		}
	}
	// First every node that answered last time, within ObserveTimeout.
	for expected > 0 {
		select {
		case i := <-answers:
			receive(i)
		case <-ctx.Done():
			expected = 0
		}
	}
	// Then the silent ones, for what their peers needed, many times over.
	grace := ObserveTimeout
	if slowest > 0 {
		grace = min(ObserveTimeout, max(silentGrace, silentFactor*slowest))
	}
	timer := time.NewTimer(time.Until(start.Add(grace)))
	defer timer.Stop()
wait:
	for pending > 0 {
		select {
		case i := <-answers:
			receive(i)
		case <-timer.C:
			break wait
		case <-ctx.Done():
			break wait
		}
	}
	waited := time.Since(start).Round(time.Millisecond)
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, addr := range addrs {
		if got[i] {
			continue
		}
		select {
		case <-atts[i].done:
			// It answered between the last wait and the lock: its record stands.
			views[i] = atts[i].view
			views[i].Addr = addr
		default:
			views[i] = NodeView{Addr: addr, Err: fmt.Errorf("observe %s: no answer within %s", addr, waited)}
			if p.gen[cluster] == gen {
				p.markSilent(cluster, addr, true)
			}
		}
	}
	return views
}

// run observes one node for attempt a and records the outcome: the view, and whether the node
// is silent. It is bounded by CommandTimeout and by nothing of the pass (ctx's values only).
func (p *Pool) run(ctx context.Context, cluster, addr string, creds Credentials, gen uint64, a *attempt) {
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), CommandTimeout)
	defer cancel()
	v := p.observeOne(actx, cluster, addr, creds, gen)
	p.mu.Lock()
	a.view = v
	if p.inflight[cluster][addr] == a {
		delete(p.inflight[cluster], addr)
		if len(p.inflight[cluster]) == 0 {
			delete(p.inflight, cluster)
		}
	}
	if p.gen[cluster] == gen {
		p.markSilent(cluster, addr, !v.Reachable && !IsServerError(v.Err))
	}
	// Closed under the lock: an Observe that holds it sees the view and the mark together.
	close(a.done)
	p.mu.Unlock()
}

// observeOne observes one node over the pool's Client for it.
func (p *Pool) observeOne(ctx context.Context, cluster, addr string, creds Credentials, gen uint64) (v NodeView) {
	v = NodeView{Addr: addr}
	defer func() {
		// A reply the client cannot read (a pod that only claims to be a node, a broken
		// server) must cost that node's view, not the process: the panic of a goroutine
		// the operator starts is not recovered by controller-runtime, and one bad node
		// would stop the operator for every cluster.
		if r := recover(); r != nil {
			v = NodeView{Addr: addr, Err: fmt.Errorf("observe %s: %w", addr, logging.Recovered(r))}
			p.dropAddr(cluster, addr)
		}
	}()
	c, err := p.client(cluster, addr, creds, gen)
	if err != nil {
		v.Err = err
		return v
	}
	v = observeWith(ctx, c, v)
	if !v.Reachable && ClosedByNode(v.Err) && ctx.Err() == nil {
		// The node closed the pooled connection while it sat idle between looks: Valkey does so
		// to a client idle for longer than its `timeout` setting, and a node whose container
		// restarted closed all of them. Nothing pings the connection in between (IdleCheck is
		// above the look period), so only this query finds out; the failed query made the client
		// drop that connection, and one more try dials afresh, for at most RedialWithin: a node
		// that is up answers it at once, and a node whose process died (refused, or its pod's
		// address gone) must not hold the pass any longer than its first answer did. A cut one
		// times out, which is not retried.
		rctx, cancel := context.WithTimeout(ctx, RedialWithin)
		v = observeWith(rctx, c, NodeView{Addr: addr})
		cancel()
	}
	if !v.Reachable && !IsServerError(v.Err) {
		p.drop(cluster, addr, c)
	}
	return v
}

// ClosedByNode reports whether err is a connection the other end closed (or reset): a query
// that failed at once, not one that waited for an answer. The failed query made the client drop
// that connection, so one more try on the same Client dials afresh.
func ClosedByNode(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.ErrClosedPipe) ||
		errors.Is(err, net.ErrClosed) || errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// markSilent records whether addr of cluster did not answer its last observation. Called with
// p.mu held.
func (p *Pool) markSilent(cluster, addr string, silent bool) {
	if !silent {
		delete(p.silent[cluster], addr)
		if len(p.silent[cluster]) == 0 {
			delete(p.silent, cluster)
		}
		return
	}
	if p.silent == nil {
		p.silent = map[string]map[string]bool{}
	}
	if p.silent[cluster] == nil {
		p.silent[cluster] = map[string]bool{}
	}
	p.silent[cluster][addr] = true
}

// dropAddr closes and removes the pool's Client for addr, whichever it is.
func (p *Pool) dropAddr(cluster, addr string) {
	p.mu.Lock()
	e, ok := p.clusters[cluster][addr]
	if ok {
		delete(p.clusters[cluster], addr)
	}
	p.mu.Unlock()
	if ok {
		e.c.Close() // outside the lock: closing a connection to a silent node can take a while
	}
}

// drop closes c and removes it, if it is still the pool's Client for addr.
func (p *Pool) drop(cluster, addr string, c *Client) {
	p.mu.Lock()
	e, ok := p.clusters[cluster][addr]
	mine := ok && e.c == c
	if mine {
		delete(p.clusters[cluster], addr)
	}
	p.mu.Unlock()
	if mine {
		c.Close() // outside the lock: closing a connection to a silent node can take a while
	}
}
