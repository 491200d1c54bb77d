package logging

import (
	"strconv"
	"unicode/utf8"
)

// MaxText bounds the text the operator passes on from elsewhere: every string value of a log
// field (an error, a reason) and the status.message and condition messages it writes
// (controllers, buildStatus). A node's error or reply is text of the node's choosing: a node the
// operator dials may be a team's program (or a module's), and Valkey echoes some arguments in its
// errors, so without a bound one reply of megabytes would be written into every log line and
// status write of every pass, and a status message over the API server's 32 KiB condition limit
// would make every status write of the cluster fail. 4 KiB holds any message the operator
// composes itself (a Valkey error is a line of at most a few hundred bytes) with room to spare,
// and keeps the worst line of a pass small.
const MaxText = 4096

// Cap returns s when it is at most MaxText bytes, otherwise its beginning, cut at a rune
// boundary, and how many bytes were left out, in at most MaxText bytes all told: what is kept is
// still a readable, valid UTF-8 message. Applied where text leaves the operator (the log encoder,
// the status write), so no path can forget it.
func Cap(s string) string {
	if len(s) <= MaxText {
		return s
	}
	// The marker is at most 32 bytes: " … [" + up to 20 digits + " bytes cut]" and some.
	n := MaxText - 32
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + " … [" + strconv.Itoa(len(s)-n) + " bytes cut]"
}
