package harness

import (
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"testing"
	"time"
)

// MetricsToken is harness.MetricsReaderToken, for a test.
func MetricsToken(t testing.TB) string {
	t.Helper()
	token, err := MetricsReaderToken(context.Background(), K8s)
	if err != nil {
		t.Fatal(err)
	}
	return token
}

// GetMetrics GETs /metrics at addr over HTTPS with token ("" for none), once, and returns the
// status and the body.
func GetMetrics(addr, token string) (int, []byte, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+addr+"/metrics", nil)
	if err != nil {
		return 0, nil, err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the operator's self-signed certificate
	resp, err := hc.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}
