package logging

import (
	"fmt"
	"io"

	"go.uber.org/zap"
)

// ExitClientBuild is the exit code when the Kubernetes client cannot be built: the original
// panicked, and a Rust panic exits with 101.
const ExitClientBuild = 101

// ClientBuildFailed writes the plain-text line for a Kubernetes client that cannot be built to
// stderr (no JSON: logging may not even be set up) and returns ExitClientBuild for os.Exit.
func ClientBuildFailed(stderr io.Writer, err error) int {
	_, _ = fmt.Fprintf(stderr, "failed to create Kubernetes client: %v\n", err)
	return ExitClientBuild
}

// InvalidConfig logs the single ERROR line for an invalid operator setting at startup; the
// caller then exits non-zero. It passes at every RUST_LOG except `off`.
func InvalidConfig(log *zap.Logger, key, value string, err error) {
	Target(log, TargetOperator).Error(MsgInvalidConfig,
		zap.String(FieldKey, key), zap.String(FieldValue, value), Err(err))
}
