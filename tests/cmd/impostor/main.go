// Command impostor stands, in the local cluster's end-to-end tests, for a program a team runs in
// a pod it made under a Valkey node's name (tests/e2e/tenancy): it listens on Valkey's port,
// writes every connection and every byte it receives to stdout (the pod's log, which the test
// reads: it must never see the operator connect, let alone send its password), and answers every
// read with a reply no client should trust, `$-2` by default (a bulk length below -1, which made
// valkey-go v1.0.79 panic on its own goroutine). The local kubelet runs it for the image
// harness.ImpostorImage (docs/dev/local-cluster.md).
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
)

func main() {
	addr := flag.String("listen", ":6379", "address to listen on")
	reply := flag.String("reply", "$-2\r\n", "what to answer every read with")
	flag.Parse()
	l, err := net.Listen("tcp", *addr)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("listening on %s\n", l.Addr())
	for {
		c, err := l.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		go serve(c, *reply)
	}
}

// serve logs what c sends and answers each read with reply, until c closes.
func serve(c net.Conn, reply string) {
	defer func() { _ = c.Close() }()
	fmt.Printf("connection from %s\n", c.RemoteAddr())
	buf := make([]byte, 64<<10)
	for {
		n, err := c.Read(buf)
		if n > 0 {
			fmt.Printf("received from %s: %q\n", c.RemoteAddr(), buf[:n])
			if _, err := c.Write([]byte(reply)); err != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}
