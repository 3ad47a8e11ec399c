package policy

import "fmt"

// Error is a policy that cannot decide saying why. Decide returns one; the host reports
// it as a `PolicyFailed` condition, a Warning Event and a metric, touches nothing, and
// retries with backoff. Any other error is reported with reason `Error`, and a panic
// with reason `Panic`.
type Error struct {
	// Reason is CamelCase, as in Kubernetes conditions.
	Reason  string
	Message string
}

func (e *Error) Error() string {
	return e.Reason + ": " + e.Message
}

// Errorf is an *Error with this reason and a formatted message.
func Errorf(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}
