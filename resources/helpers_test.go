package resources

import (
	"crypto/sha256"
	"encoding/hex"
	"net"
	"testing"
)

// freePort is a TCP port free on 127.0.0.1 when asked.
func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	return port
}

// sha256Hex is a password's hash as an ACL file holds it.
func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
