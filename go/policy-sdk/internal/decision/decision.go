// Package decision runs a served policy's decision the way the contract wants it, for
// either world: what the decision returns converted for the boundary, and an error it
// returns, or a panic, as the decision's policy-error.
package decision

import (
	"errors"
	"fmt"

	policy "podset.dev/policy-sdk"
)

// Failure is a decision's policy-error: a *policy.Error's reason and message, reason
// `Error` for any other error, reason `Panic` for a panic.
type Failure struct {
	Reason  string
	Message string
}

// Run calls decide, then convert on its actions. A panic in either is recovered.
func Run[A, W any](decide func() ([]A, error), convert func([]A) ([]W, error)) (out []W, failure *Failure) {
	defer func() {
		if r := recover(); r != nil {
			out, failure = nil, &Failure{Reason: "Panic", Message: fmt.Sprint(r)}
		}
	}()
	actions, err := decide()
	if err == nil {
		if out, err = convert(actions); err == nil {
			return out, nil
		}
	}
	if e := (*policy.Error)(nil); errors.As(err, &e) {
		return nil, &Failure{Reason: e.Reason, Message: e.Message}
	}
	return nil, &Failure{Reason: "Error", Message: err.Error()}
}
