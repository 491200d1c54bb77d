package logging

import (
	"fmt"
	"runtime/debug"

	"go.uber.org/zap"
)

// PanicError is a panic recovered on a goroutine that talked to a node (a fan-out step, a slot
// move): a broken invariant, which fails that node's step instead of the process. controller-
// runtime recovers a reconcile's own goroutine (MsgReconcilePanicked), but not the ones it
// starts, and an unrecovered panic there would stop the operator for every team.
type PanicError struct {
	Value any
	// Stack is the panicking goroutine's stack, at most maxStack bytes.
	Stack string
}

// maxStack bounds the stack a PanicError keeps (and logs).
const maxStack = 8 << 10

func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// Recovered is the PanicError of r, a value recover returned. Call it in the deferred function
// that recovered r: the stack is then the panicking goroutine's.
func Recovered(r any) *PanicError {
	st := debug.Stack()
	if len(st) > maxStack {
		st = st[:maxStack]
	}
	return &PanicError{Value: r, Stack: string(st)}
}

// LogPanic says err at ERROR (MsgNodeStepPanicked), with the pod whose step panicked and the
// stack.
func LogPanic(log *zap.Logger, pod string, err *PanicError) {
	log.Error(MsgNodeStepPanicked, Pod(pod), Err(err), zap.String(FieldStack, err.Stack))
}
