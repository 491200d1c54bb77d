// Package logging reproduces the original Rust operator's log stream, a public interface
// (seeds/logging.txt, SPEC section 6): tracing-subscriber's JSON formatter, EnvFilter's RUST_LOG
// directives and kube-runtime's reconcile span, built on zap.
//
// Use:
//
//	log := logging.New(os.Stdout, os.Stderr, os.Getenv("RUST_LOG"), nil) // once, at startup
//	zap.ReplaceGlobals(log)
//	logging.SetupLibraryLogging(log) // controller-runtime and klog through the same encoder
//
//	// in a controller, through Tracker.Reconciler (see Tracker):
//	l := logging.Target(logging.FromContext(ctx), logging.TargetACL)
//	l.Info(logging.MsgACLTick, logging.ClusterName(cluster.Name))
//
// Every line is {"timestamp","level","fields","target"} plus "span" and "spans" inside a
// reconcile. Messages, levels, targets and field names live in catalogue.go.
//
// Where this package knowingly differs from the original, and why:
//
//   - RUST_LOG unset or empty (or with no valid directive at all) means `error`; the original
//     logs nothing then. This is the one deliberate difference of the contract: a broken
//     operator always says why.
//   - Events inside a reconcile carry "span"/"spans" at every verbosity. In the original the
//     span is an INFO span of target kube_runtime::controller, so `RUST_LOG=warn` or
//     `RUST_LOG=operator=debug` would have dropped it; the contract asks for it always.
//   - Library output (controller-runtime under controller_runtime::…, client-go's klog under
//     kube_client) is capped at WARN unless a directive names its target, library errors are
//     WARN, and controller-runtime's "Reconciler error" is replaced by the catalogue's
//     `reconcile error, requeuing` (see logr.go).
//   - Values zap has and tracing has not are written as strings: durations in Go's notation
//     ("1m30s"), times in RFC 3339, other values as their %v text. Invalid UTF-8, impossible in
//     Rust, becomes U+FFFD. Field-value patterns in span directives use Go's regexp syntax.
package logging
