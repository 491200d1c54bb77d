package harness

import (
	"context"
	"fmt"
	"testing"
	"time"
)

// PollInterval is how often Poll looks again: often enough that a wait ends within a quarter
// second of its condition, seldom enough that a hundred waits do not load the API server.
const PollInterval = 250 * time.Millisecond

// Poll is the one wait loop of the end-to-end tests. It calls check until check returns "" and
// then returns "", or until timeout has passed or ctx is done and then returns what check said
// last. check says what is still missing rather than whether, so a wait that times out fails
// with its evidence ("2 of 3 pods Ready: vc-1-0 Pending") instead of "condition not met". check
// runs at once, then every PollInterval.
func Poll(ctx context.Context, timeout time.Duration, check func() string) string {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		problem := check()
		if problem == "" {
			return ""
		}
		select {
		case <-ctx.Done():
			return problem
		case <-time.After(PollInterval):
		}
	}
}

// WaitFor polls check (see Poll) until it returns "" and fails t if it still says something
// after timeout: "<what> within <timeout>: <what check said last>".
func WaitFor(t testing.TB, what string, timeout time.Duration, check func() string) {
	t.Helper()
	if problem := Poll(t.Context(), timeout, check); problem != "" {
		t.Fatalf("%s within %s: %s", what, timeout, problem)
	}
}

// Problemf formats a check's problem for Poll; a nil error is no problem.
func Problemf(err error, format string, args ...any) string {
	if err != nil {
		return fmt.Sprintf(format, args...) + ": " + err.Error()
	}
	return ""
}
