package harness

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	valkeygo "github.com/valkey-io/valkey-go"
)

// WriterSlots is how many writers a Writer runs, each on its own slot.
const WriterSlots = 16

// Writer is a cluster client writing sequential keys on WriterSlots slots spread evenly over
// the slot space (one hash tag per slot), so every shard of a cluster takes writes. For every
// key it records whether the SET was acknowledged and whether `WAIT 1` then confirmed that a
// replica had it (on every write, or on a sample: WriterOptions.WaitEvery); for every slot,
// each time writes to it were refused. Report reads every acknowledged key back.
//
// It is the evidence for the failover claims: a key acknowledged by WAIT 1 must survive the
// loss of its primary; a key acknowledged without it may be lost in a crash (Valkey replicates
// asynchronously) and is counted apart, neither a pass nor a failure.
type Writer struct {
	client valkeygo.Client
	cancel context.CancelFunc
	wg     sync.WaitGroup
	slots  []*slotWriter
	start  time.Time
	stop   time.Time
	closed sync.Once
	// password is the one new connections authenticate with (SetPassword): a password rotation
	// must not cut the writer off once the old password is gone.
	password atomic.Pointer[string]
}

// WriterOptions configure StartWriter.
type WriterOptions struct {
	// Addrs seed the cluster client (host:port of any nodes).
	Addrs []string
	// Username and Password, when set, authenticate every connection.
	Username, Password string
	// Prefix starts every key, so two writers on one cluster do not collide.
	Prefix string
	// WaitTimeout bounds each `WAIT 1`. Default 200 ms: long enough for a healthy replica on
	// this machine, short enough that a shard without a replica still takes writes.
	WaitTimeout time.Duration
	// OpTimeout bounds each SET+WAIT round trip. Default 1 s.
	OpTimeout time.Duration
	// Interval between writes of one slot. Default 20 ms: up to 800 writes a second over the
	// 16 slots, a refusal measured to 20 ms. At 5 ms a writer made about 1 500 SET+WAIT round
	// trips a second, and the three lanes of make test each run one on two cores.
	Interval time.Duration
	// TLS, when set, is the client's TLS configuration (a TLS cluster); Dialer, when set,
	// replaces the default dialer (one resolving through the cluster DNS, for the hostnames a
	// TLS cluster announces).
	TLS    *tls.Config
	Dialer *net.Dialer
	// WaitEvery sends `WAIT 1` after every WaitEvery-th write of a slot only (0 or 1: after
	// every write). A sample keeps the writer's load down on a busy machine while still telling
	// replicated acknowledged writes from unreplicated ones; a write without WAIT counts as
	// unreplicated.
	WaitEvery int
}

// dialer is the writer's dialer: opts.Dialer or a plain one, with a one-second timeout.
func (opts WriterOptions) dialer() net.Dialer {
	d := net.Dialer{}
	if opts.Dialer != nil {
		d = *opts.Dialer
	}
	d.Timeout = time.Second
	return d
}

type slotWriter struct {
	tag  string
	slot int

	mu         sync.Mutex
	acked      []keyRecord // keys whose SET returned OK
	failures   int         // SETs that returned an error
	unanswered int         // of those, no reply within OpTimeout
	closed     int         // of those, the connection closed under the write (EOF, reset)
	// failingSince is when the first refused write of the current refusal began (zero while
	// writes succeed), failingWrites how many writes it has refused; longest and longestAt are
	// the longest refusal so far; refusals every refusal that ended.
	failingSince  time.Time
	failingWrites int
	longest       time.Duration
	longestAt     time.Time
	refusals      []Refusal
	lastErr       string
}

type keyRecord struct {
	key, value string
	replicated bool      // WAIT 1 returned >= 1
	at         time.Time // when the SET was acknowledged
}

// Refusal is one unbroken run of refused writes on one slot: from the first refused write's
// start to the next acknowledged write (or the writer's stop).
type Refusal struct {
	Slot       int
	Start, End time.Time
	// Writes refused in the run, and the last error.
	Writes  int
	LastErr string
}

// StartWriter connects a cluster client and starts the writers.
func StartWriter(opts WriterOptions) (*Writer, error) {
	if opts.WaitTimeout == 0 {
		opts.WaitTimeout = 200 * time.Millisecond
	}
	if opts.OpTimeout == 0 {
		opts.OpTimeout = time.Second
	}
	if opts.Interval == 0 {
		opts.Interval = 20 * time.Millisecond
	}
	w := &Writer{start: time.Now()}
	w.password.Store(&opts.Password)
	c, err := valkeygo.NewClient(valkeygo.ClientOption{
		InitAddress: opts.Addrs,
		AuthCredentialsFn: func(valkeygo.AuthCredentialsContext) (valkeygo.AuthCredentials, error) {
			return valkeygo.AuthCredentials{Username: opts.Username, Password: *w.password.Load()}, nil
		},
		DisableCache:     true,
		Dialer:           opts.dialer(),
		TLSConfig:        opts.TLS,
		ConnWriteTimeout: 2 * time.Second,
		// A refused write is recorded, not retried behind our back: the refusal window is
		// what we measure.
		DisableRetry: true,
	})
	if err != nil {
		return nil, fmt.Errorf("writer: cluster client: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	w.client, w.cancel = c, cancel
	for i, tag := range spreadTags(WriterSlots) {
		s := &slotWriter{tag: tag, slot: Slot(tag)}
		w.slots = append(w.slots, s)
		w.wg.Add(1)
		go func() {
			defer w.wg.Done()
			w.run(ctx, s, fmt.Sprintf("%s{%s}:", opts.Prefix, tag), i, opts)
		}()
	}
	return w, nil
}

func (w *Writer) run(ctx context.Context, s *slotWriter, prefix string, id int, opts WriterOptions) {
	waitMs := opts.WaitTimeout.Milliseconds()
	for n := 0; ctx.Err() == nil; n++ {
		key, value := prefix+strconv.Itoa(n), strconv.Itoa(n*WriterSlots+id)
		began := time.Now()
		octx, cancel := context.WithTimeout(ctx, opts.OpTimeout)
		var res []valkeygo.ValkeyResult
		if opts.WaitEvery <= 1 || n%opts.WaitEvery == 0 {
			// SET and WAIT go to the same connection: WAIT has no key, and the client sends a
			// keyless command of a batch to the node of the batch's slot. Should the SET be
			// redirected after a failover, WAIT still ran on the old node: a replica answers it
			// with an error, so a redirected write is never counted as replicated.
			res = w.doMulti(octx,
				w.client.B().Set().Key(key).Value(value).Build(),
				w.client.B().Wait().Numreplicas(1).Timeout(waitMs).Build())
		} else {
			res = []valkeygo.ValkeyResult{
				w.client.Do(octx, w.client.B().Set().Key(key).Value(value).Build()),
				valkeygo.NewErrorResult(errNotSampled),
			}
		}
		cancel()
		if ctx.Err() != nil && errors.Is(res[0].Error(), context.Canceled) {
			return // stopped mid-write: neither an acknowledgement nor a refusal
		}
		now := time.Now()
		s.mu.Lock()
		if err := res[0].Error(); err != nil {
			s.failures++
			// No reply in time, whichever deadline noticed first: the write's context, or the
			// connection's read deadline ("i/o timeout").
			var ne net.Error
			if errors.Is(err, context.DeadlineExceeded) || (errors.As(err, &ne) && ne.Timeout()) {
				s.unanswered++
			} else if errors.Is(err, io.EOF) || errors.Is(err, syscall.ECONNRESET) {
				s.closed++
			}
			s.lastErr = err.Error()
			if s.failingSince.IsZero() {
				s.failingSince = began
			}
			s.failingWrites++
		} else {
			acked, werr := res[1].AsInt64()
			s.acked = append(s.acked, keyRecord{key: key, value: value, replicated: werr == nil && acked >= 1, at: now})
			s.endRefusal(now)
		}
		s.mu.Unlock()
		select {
		case <-ctx.Done():
		case <-time.After(opts.Interval):
		}
	}
}

// errNotSampled stands for the WAIT a write outside the WaitEvery sample did not send.
var errNotSampled = errors.New("WAIT not sampled")

// SetPassword makes new connections authenticate with pw (the writer's user keeps its name):
// after a password rotation the writer moves to the new password as an application would.
// Open connections stay authenticated as they were.
func (w *Writer) SetPassword(pw string) { w.password.Store(&pw) }

// Password is the password new connections use now.
func (w *Writer) Password() string { return *w.password.Load() }

// doMulti is the client's DoMulti of a SET and its WAIT. valkey-go v1.0.79 panics (index out
// of range in clusterClient.doresultfn; v1.0.80 has the same code) when the SET of such a batch
// is answered ASK, as it is while its slot migrates. Then the SET alone is sent again with Do,
// which follows ASK; the write counts as acknowledged by its primary only (WAIT did not run), so
// it is never taken for a replicated one.
func (w *Writer) doMulti(ctx context.Context, cmds ...valkeygo.Completed) (res []valkeygo.ValkeyResult) {
	defer func() {
		if r := recover(); r != nil {
			res = []valkeygo.ValkeyResult{
				w.client.Do(ctx, cmds[0]),
				valkeygo.NewErrorResult(fmt.Errorf("WAIT not sent: valkey-go panicked on the batch: %v", r)),
			}
		}
	}()
	return w.client.DoMulti(ctx, cmds...)
}

// endRefusal closes the current refusal, if any, at t. Callers hold s.mu.
func (s *slotWriter) endRefusal(t time.Time) {
	if s.failingSince.IsZero() {
		return
	}
	if d := t.Sub(s.failingSince); d > s.longest {
		s.longest, s.longestAt = d, s.failingSince
	}
	s.refusals = append(s.refusals, Refusal{Slot: s.slot, Start: s.failingSince, End: t, Writes: s.failingWrites, LastErr: s.lastErr})
	s.failingSince, s.failingWrites = time.Time{}, 0
}

// Stop stops writing. A refusal still going on counts until now.
func (w *Writer) Stop() {
	if w.stop.IsZero() {
		w.cancel()
		w.wg.Wait()
		w.stop = time.Now()
		for _, s := range w.slots {
			s.mu.Lock()
			s.endRefusal(w.stop)
			s.mu.Unlock()
		}
	}
}

// Close stops the writer and closes its client; a second call does nothing.
func (w *Writer) Close() {
	w.closed.Do(func() {
		w.Stop()
		w.client.Close()
	})
}

// Acked returns how many writes were acknowledged so far, over all slots.
func (w *Writer) Acked() int {
	n := 0
	for _, s := range w.slots {
		s.mu.Lock()
		n += len(s.acked)
		s.mu.Unlock()
	}
	return n
}

// WaitAcked waits until every slot has at least n more acknowledged writes than now, or
// timeout passes: proof that each slot takes writes (after a fault, say).
func (w *Writer) WaitAcked(n int, timeout time.Duration) error {
	base := make([]int, len(w.slots))
	for i, s := range w.slots {
		s.mu.Lock()
		base[i] = len(s.acked)
		s.mu.Unlock()
	}
	deadline := time.Now().Add(timeout)
	for {
		var behind []string
		for i, s := range w.slots {
			s.mu.Lock()
			if len(s.acked)-base[i] < n {
				behind = append(behind, fmt.Sprintf("slot %d (%s)", s.slot, s.lastErr))
			}
			s.mu.Unlock()
		}
		if len(behind) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("writer: no %d acknowledged writes within %s on %s", n, timeout, strings.Join(behind, ", "))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Refusals returns every run of refused writes so far, over all slots, in order of start: those
// that ended, and those still going on, as if they ended now. It reads no key back and leaves
// the writer running: for a writer whose keys are not checked (a baseline's, Twin).
func (w *Writer) Refusals() []Refusal {
	now := time.Now()
	var out []Refusal
	for _, s := range w.slots {
		s.mu.Lock()
		out = append(out, s.refusals...)
		if !s.failingSince.IsZero() {
			out = append(out, Refusal{Slot: s.slot, Start: s.failingSince, End: now, Writes: s.failingWrites, LastErr: s.lastErr})
		}
		s.mu.Unlock()
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// SlotReport is one slot's outcome.
type SlotReport struct {
	Slot     int
	Tag      string
	Acked    int
	Failures int
	// Unanswered counts the failures that got no reply within OpTimeout (the client gave up):
	// a latency figure, apart from writes Valkey or the connection refused.
	Unanswered int
	// Closed counts the failures whose connection closed under the write (EOF, reset): Valkey
	// 8.0.1 drops a client blocked in WAIT when its primary turns replica in a graceful failover,
	// and the client's next write goes to the new primary. Neither acknowledged nor refused.
	Closed int
	// LongestRefusal is the longest time from a refused write to the next acknowledged one.
	LongestRefusal time.Duration
	// RefusalStart is when that refusal began (zero if writes were never refused).
	RefusalStart time.Time
	LastError    string
}

// Report is what a Writer saw, and what reading back found.
type Report struct {
	Duration time.Duration
	// Acked writes: the SET returned OK. Replicated: of those, WAIT 1 confirmed a replica.
	Acked, Replicated int
	// LostReplicated must be 0: a key a replica acknowledged was gone (or changed) afterwards.
	LostReplicated int
	// LostUnreplicated: acknowledged by the primary alone, gone afterwards. Valkey allows this
	// in a crash failover (asynchronous replication).
	LostUnreplicated int
	// ReadErrors: keys whose GET failed even after retries (the slot is not served).
	ReadErrors int
	// Examples of lost keys and read errors, for the log.
	Examples []string
	Slots    []SlotReport
	// Lost lists every acknowledged key that did not read back, with when it was acknowledged,
	// so a caller can tell which fault took it.
	Lost []LostKey
	// Refusals are every run of refused writes, over all slots, in order of start; a run still
	// going on when the report was made ends at that moment.
	Refusals []Refusal
}

// LostKey is an acknowledged write that did not read back.
type LostKey struct {
	Key        string
	Slot       int
	AckedAt    time.Time
	Replicated bool
}

// LongestRefusal is the longest refusal over all slots, and its slot.
func (r Report) LongestRefusal() (time.Duration, int) {
	var d time.Duration
	slot := -1
	for _, s := range r.Slots {
		if s.LongestRefusal > d {
			d, slot = s.LongestRefusal, s.Slot
		}
	}
	return d, slot
}

// String is a few lines for a test log.
func (r Report) String() string {
	var b strings.Builder
	longest, slot := r.LongestRefusal()
	fmt.Fprintf(&b, "writer over %s: %d acknowledged, %d replicated (WAIT 1), lost: %d replicated, %d unreplicated; %d read errors; longest refusal %s (slot %d)\n",
		r.Duration.Round(time.Millisecond), r.Acked, r.Replicated, r.LostReplicated, r.LostUnreplicated, r.ReadErrors, longest.Round(time.Millisecond), slot)
	for _, s := range r.Slots {
		if s.Failures > 0 || s.LongestRefusal > 0 {
			fmt.Fprintf(&b, "  slot %5d: %d acked, %d refused, longest refusal %s from %s (last error: %s)\n",
				s.Slot, s.Acked, s.Failures, s.LongestRefusal.Round(time.Millisecond), s.RefusalStart.UTC().Format("15:04:05.000"), s.LastError)
		}
	}
	for _, e := range r.Examples {
		fmt.Fprintf(&b, "  %s\n", e)
	}
	return b.String()
}

// Report stops the writer and reads back every acknowledged key through a new cluster client
// seeded with addrs (the pods of the healed cluster), with the writer's credentials.
func (w *Writer) Report(ctx context.Context, opts WriterOptions) (Report, error) {
	w.Stop()
	r := Report{Duration: w.stop.Sub(w.start)}
	// A seed address may be a pod that just went (a copy moved to another zone, a lost pod still
	// in the Service's DNS answer, whose addresses share the dialer's 5 s): the client is made
	// again, resolving afresh, for up to a minute before the read-back counts as failed.
	var c valkeygo.Client
	var err error
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Second) {
		c, err = valkeygo.NewClient(valkeygo.ClientOption{
			InitAddress: opts.Addrs, Username: opts.Username, Password: opts.Password,
			DisableCache: true, Dialer: opts.dialer(), TLSConfig: opts.TLS,
		})
		if err == nil || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return r, fmt.Errorf("writer: read-back client: %w", err)
	}
	defer c.Close()
	for _, s := range w.slots {
		s.mu.Lock()
		acked := s.acked
		r.Slots = append(r.Slots, SlotReport{Slot: s.slot, Tag: s.tag, Acked: len(acked), Failures: s.failures, Unanswered: s.unanswered, Closed: s.closed,
			LongestRefusal: s.longest, RefusalStart: s.longestAt, LastError: s.lastErr})
		r.Refusals = append(r.Refusals, s.refusals...)
		if !s.failingSince.IsZero() {
			// Still refused when the report was asked for: a run that has not ended.
			r.Refusals = append(r.Refusals, Refusal{Slot: s.slot, Start: s.failingSince, End: time.Now(), Writes: s.failingWrites, LastErr: s.lastErr})
		}
		s.mu.Unlock()
		for start := 0; start < len(acked); start += 500 {
			batch := acked[start:min(start+500, len(acked))]
			keys := make([]string, len(batch))
			for i, k := range batch {
				keys[i] = k.key
			}
			res := getWithRetry(ctx, c, keys)
			for i, k := range batch {
				r.Acked++
				if k.replicated {
					r.Replicated++
				}
				got, err := res[i].ToString()
				switch {
				case err != nil && !valkeygo.IsValkeyNil(err):
					r.ReadErrors++
					r.example(fmt.Sprintf("GET %s: %v", k.key, err))
				case err == nil && got == k.value:
				case k.replicated:
					r.LostReplicated++
					r.example(fmt.Sprintf("lost replicated key %s (want %q, got %q)", k.key, k.value, got))
					r.Lost = append(r.Lost, LostKey{Key: k.key, Slot: s.slot, AckedAt: k.at, Replicated: true})
				default:
					r.LostUnreplicated++
					r.example(fmt.Sprintf("lost unreplicated key %s (want %q, got %q)", k.key, k.value, got))
					r.Lost = append(r.Lost, LostKey{Key: k.key, Slot: s.slot, AckedAt: k.at})
				}
			}
		}
	}
	sort.Slice(r.Slots, func(i, j int) bool { return r.Slots[i].Slot < r.Slots[j].Slot })
	sort.Slice(r.Refusals, func(i, j int) bool { return r.Refusals[i].Start.Before(r.Refusals[j].Start) })
	return r, nil
}

func (r *Report) example(s string) {
	if len(r.Examples) < 10 {
		r.Examples = append(r.Examples, s)
	}
}

// getWithRetry runs a batch of GETs, retrying those that failed with anything but nil (the
// client may first need a fresh view of the cluster) for up to 10 s.
func getWithRetry(ctx context.Context, c valkeygo.Client, keys []string) []valkeygo.ValkeyResult {
	cmds := make(valkeygo.Commands, len(keys))
	for i, k := range keys {
		cmds[i] = c.B().Get().Key(k).Build()
	}
	res := c.DoMulti(ctx, cmds...)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var retry []int
		for i, r := range res {
			if err := r.Error(); err != nil && !valkeygo.IsValkeyNil(err) {
				retry = append(retry, i)
			}
		}
		if len(retry) == 0 {
			break
		}
		time.Sleep(200 * time.Millisecond)
		for _, i := range retry {
			res[i] = c.Do(ctx, c.B().Get().Key(keys[i]).Build())
		}
	}
	return res
}

// spreadTags returns n hash tags whose slots fall in n equal parts of the slot space, so that
// any even split of the slots over up to n shards gives every shard some of them.
func spreadTags(n int) []string {
	tags := make([]string, n)
	width := SlotCount / n
	for i := range n {
		for j := 0; ; j++ {
			tag := fmt.Sprintf("w%d-%d", i, j)
			// The middle half of each part, away from the edges of an even split.
			if s := Slot(tag); s >= i*width+width/4 && s < (i+1)*width-width/4 {
				tags[i] = tag
				break
			}
		}
	}
	return tags
}

// SlotCount is the number of hash slots of a Valkey cluster.
const SlotCount = 16384

// Slot is the hash slot of key (CRC16/XMODEM mod 16384, honouring a {hash tag}).
func Slot(key string) int {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			key = key[i+1 : i+1+j]
		}
	}
	var crc uint16
	for k := 0; k < len(key); k++ {
		crc ^= uint16(key[k]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return int(crc) % SlotCount
}
