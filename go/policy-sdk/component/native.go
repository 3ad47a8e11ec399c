//go:build !wasip1

package component

import (
	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/internal/served"
)

// Serve makes p the policy a native build would serve: none is called, but a main
// package that serves a policy still builds and tests natively.
func Serve(p policy.Policy) {
	served.Policy = &p
}
