//go:build !wasip1

package component

import (
	"podset.dev/policy-sdk/internal/podsetserved"
	"podset.dev/policy-sdk/podset"
)

// Serve makes p the policy a native build would serve: none is called, but a main
// package that serves a policy still builds and tests natively.
func Serve(p podset.Policy) {
	podsetserved.Policy = &p
}
