package metrics

import (
	"crypto/sha256"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The metrics endpoint checks each scrape's bearer token with a TokenReview (and its right to
// get /metrics with a SubjectAccessReview), as kubebuilder projects do. The reviews are the
// operator's own requests to the API server: with API Priority and Fairness they share the flow
// of its ServiceAccount with everything else it asks, its leader Lease's renewals among them
// (client-side rate limiting is off: controller-runtime's default). Valid tokens are reviewed
// once a minute (the authenticator caches the answers), but every made-up token is a new one:
// a pod sending them as fast as it could made the operator send TokenReviews as fast, and a
// renewal that waits behind them past the lease's deadline stops the operator.
//
// So a token that the authenticator has not seen pass (ReviewsKnownFor) is reviewed only while
// a budget of ReviewsPerSecond (burst ReviewsBurst) allows; beyond it the request is refused
// with 429 Too Many Requests at once, without a review. A scraper whose token passed is never
// held by the budget. Why this and not another limit: a cache of failed tokens cannot help (a
// flood never repeats one), a limit per source address lets many pods (or one address behind a
// proxy) through, and a client of its own with a QPS limit queues the requests in the operator
// while the reviews still go to the API server in the same flow. The NetworkPolicy of the
// metrics port (manifests, chart) keeps other pods away from the endpoint in the first place.
const (
	// ReviewsPerSecond and ReviewsBurst bound the TokenReviews of tokens not known to pass.
	ReviewsPerSecond = 1
	ReviewsBurst     = 10
	// ReviewsKnownFor is how long a token that passed is let through without the budget, from
	// its last pass; at most knownTokens are remembered, by their SHA-256.
	ReviewsKnownFor = 10 * time.Minute
	knownTokens     = 1024
)

// AuthFilter is the metrics endpoint's filter: controller-runtime's authentication and
// authorization (filters.WithAuthenticationAndAuthorization) behind LimitReviews.
func AuthFilter(c *rest.Config, hc *http.Client) (metricsserver.Filter, error) {
	inner, err := filters.WithAuthenticationAndAuthorization(c, hc)
	if err != nil {
		return nil, err
	}
	return LimitReviews(inner, ReviewsPerSecond, ReviewsBurst), nil
}

// LimitReviews puts inner, a filter that reviews bearer tokens, behind the budget described
// above: qps reviews a second, burst at once, for tokens not known to pass. A request without a
// bearer token costs no review and goes to inner as it is.
func LimitReviews(inner metricsserver.Filter, qps float32, burst int) metricsserver.Filter {
	l := &reviews{budget: flowcontrol.NewTokenBucketRateLimiter(qps, burst), known: map[[sha256.Size]byte]time.Time{}, now: time.Now}
	return func(log logr.Logger, h http.Handler) (http.Handler, error) {
		next, err := inner(log, h)
		if err != nil {
			return nil, err
		}
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			token, ok := bearer(req)
			if !ok {
				next.ServeHTTP(w, req)
				return
			}
			key := sha256.Sum256([]byte(token))
			if !l.admit(key) {
				w.Header().Set("Retry-After", "1")
				http.Error(w, "too many tokens to review: try again later", http.StatusTooManyRequests)
				return
			}
			rec := &statusWriter{ResponseWriter: w, code: http.StatusOK}
			next.ServeHTTP(rec, req)
			// 401: the token did not pass; 500: it could not be reviewed. Anything else (403
			// included: authenticated, not authorized) means it passed.
			if rec.code != http.StatusUnauthorized && rec.code != http.StatusInternalServerError {
				l.passed(key)
			}
		}), nil
	}
}

// reviews is the budget of token reviews and the tokens known to pass.
type reviews struct {
	budget flowcontrol.RateLimiter
	mu     sync.Mutex
	known  map[[sha256.Size]byte]time.Time
	now    func() time.Time
}

// admit reports whether a request with the token of hash key may be reviewed.
func (r *reviews) admit(key [sha256.Size]byte) bool {
	r.mu.Lock()
	at, ok := r.known[key]
	r.mu.Unlock()
	if ok && r.now().Sub(at) < ReviewsKnownFor {
		return true
	}
	return r.budget.TryAccept()
}

// passed remembers that the token of hash key passed.
func (r *reviews) passed(key [sha256.Size]byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	if _, ok := r.known[key]; !ok && len(r.known) >= knownTokens {
		for k, at := range r.known {
			if now.Sub(at) >= ReviewsKnownFor {
				delete(r.known, k)
			}
		}
		if len(r.known) >= knownTokens {
			return // full of live tokens: this one goes through the budget
		}
	}
	r.known[key] = now
}

// bearer is the request's bearer token, as the API server's authenticator reads it.
func bearer(req *http.Request) (string, bool) {
	auth := strings.TrimSpace(req.Header.Get("Authorization"))
	scheme, token, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// statusWriter records the status a handler wrote.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	w.code = code
	w.ResponseWriter.WriteHeader(code)
}
