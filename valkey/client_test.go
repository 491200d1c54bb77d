package valkey

import (
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	base := errors.New("ERR bad argument 'hunter2' near hunter2")
	tests := []struct {
		name    string
		err     error
		secrets []string
		want    string
		same    bool // the original error, chain intact
	}{
		{name: "nil", err: nil, secrets: []string{"x"}},
		{name: "no secret present", err: base, secrets: []string{"other"}, want: base.Error(), same: true},
		{name: "empty secret ignored", err: base, secrets: []string{""}, want: base.Error(), same: true},
		{name: "every occurrence", err: fmt.Errorf("config set on a: %w", base), secrets: []string{"", "hunter2"},
			want: "config set on a: ERR bad argument '[redacted]' near [redacted]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := redact(tt.err, tt.secrets...)
			if tt.err == nil {
				if got != nil {
					t.Fatalf("redact(nil) = %v", got)
				}
				return
			}
			if got.Error() != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
			// Identity is the point: redact returns the very same error when it holds no secret.
			if same := got == tt.err; tt.same != same { //nolint:errorlint // identity, not equivalence
				t.Errorf("same error = %v, want %v", same, tt.same)
			}
			// A redacted error keeps no chain that could print the secret.
			for e := got; e != nil; e = errors.Unwrap(e) {
				if strings.Contains(e.Error(), "hunter2") && !tt.same {
					t.Errorf("chain still holds the secret: %v", e)
				}
			}
		})
	}
}

func TestCredentialsNeverPrintPassword(t *testing.T) {
	c := Credentials{Username: "ops", Password: "hunter2"}
	for _, format := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(format, c); strings.Contains(s, "hunter2") || !strings.Contains(s, "ops") {
			t.Errorf("%s: %s", format, s)
		}
		if s := fmt.Sprintf(format, &c); strings.Contains(s, "hunter2") {
			t.Errorf("%s of pointer: %s", format, s)
		}
	}
	if s := fmt.Sprint(Credentials{}); !strings.Contains(s, "Password:none") {
		t.Errorf("empty credentials: %s", s)
	}
}

// A node is dialled at its IP but verified under its DNS name: each node's TLS configuration is
// the cluster's, with that node's server name and verification on; without TLS there is none.
func TestCredentialsTLSFor(t *testing.T) {
	if (Credentials{}).tlsFor("10.0.0.1:6379") != nil {
		t.Fatal("TLS without a TLS configuration")
	}
	base := &tls.Config{MinVersion: tls.VersionTLS12}
	names := map[string]string{"10.0.0.1:6379": "pod-a.vc.ns.svc.cluster.local"}
	creds := Credentials{TLS: base, ServerName: func(a string) string { return names[a] }}
	got := creds.tlsFor("10.0.0.1:6379")
	if got == base || got.ServerName != "pod-a.vc.ns.svc.cluster.local" || got.InsecureSkipVerify {
		t.Fatalf("config for a node: server name %q, skip verify %v, shared %v", got.ServerName, got.InsecureSkipVerify, got == base)
	}
	if base.ServerName != "" {
		t.Fatal("the cluster's configuration was changed")
	}
	e := &pooled{tls: base, serverName: "pod-a.vc.ns.svc.cluster.local"}
	if !e.matches("10.0.0.1:6379", creds) {
		t.Error("a client opened for the same node and configuration does not match")
	}
	names["10.0.0.1:6379"] = "pod-b.vc.ns.svc.cluster.local"
	if e.matches("10.0.0.1:6379", creds) {
		t.Error("a client opened under another node's name still matches: an IP reused by another pod would be trusted")
	}
}
