package metrics

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-logr/logr"
)

// TestBadTokensAreLimited: behind LimitReviews, a flood of made-up tokens (2 000, 32 at once)
// costs at most the burst of reviews and the rest are refused with 429 without one, while the
// scraper whose token passed is served every time and a request without a token is refused as
// before, for free. The inner filter stands in for controller-runtime's (each token it sees is a
// TokenReview); the end-to-end test (tests/e2e/observability) counts the API server's reviews.
func TestBadTokensAreLimited(t *testing.T) {
	var reviewed atomic.Int32
	inner := func(_ logr.Logger, h http.Handler) (http.Handler, error) {
		return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			token, ok := bearer(req)
			if !ok {
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			if token != "good" { // the scraper's is reviewed once a minute (the authenticator's cache)
				reviewed.Add(1)
				http.Error(w, "Unauthorized", http.StatusUnauthorized)
				return
			}
			h.ServeHTTP(w, req)
		}), nil
	}
	const qps, burst = 0.001, 10 // no refill within the test: the burst is the whole budget
	h, err := LimitReviews(inner, qps, burst)(logr.Discard(), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) }))
	if err != nil {
		t.Fatal(err)
	}
	get := func(token string) int {
		req := httptest.NewRequest(http.MethodGet, "/metrics", nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec.Code
	}
	if code := get("good"); code != http.StatusOK {
		t.Fatalf("the scraper's token: %d", code)
	}
	codes := map[int]int{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	work := make(chan int)
	for range 32 {
		wg.Go(func() {
			for i := range work {
				code := get(fmt.Sprintf("made-up-%d", i))
				mu.Lock()
				codes[code]++
				mu.Unlock()
			}
		})
	}
	good := 0
	for i := range 2000 {
		work <- i
		if i%100 == 0 && get("good") == http.StatusOK {
			good++
		}
	}
	close(work)
	wg.Wait()
	t.Logf("2 000 made-up tokens: %d reviews, answers %v; the scraper served %d of 20 times", reviewed.Load(), codes, good)
	if n := reviewed.Load(); n > burst {
		t.Errorf("%d made-up tokens reviewed, want at most the burst (%d)", n, burst)
	}
	if codes[http.StatusTooManyRequests] < 2000-burst {
		t.Errorf("%d made-up tokens refused with 429, want all but the burst", codes[http.StatusTooManyRequests])
	}
	if good != 20 {
		t.Errorf("the scraper was served %d of 20 times during the flood", good)
	}
	if code := get(""); code != http.StatusUnauthorized {
		t.Errorf("no token: %d, want 401", code)
	}
}
