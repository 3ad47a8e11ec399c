//go:build wasip1

// Package component makes a PodSet policy a component of the `podset-policy` world. Only
// a component's main package imports it (it links the contract's exports and the host's
// `log`, which exist only in WebAssembly):
//
//	package main
//
//	func init() { component.Serve(mypolicy.Policy) }
//
//	func main() {}
//
// Serve belongs in an init function: a component is a reactor, its main never runs.
// Built natively (for `go test` of a main package), Serve only keeps the policy.
package component

import (
	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/internal/podsetserved"
	hostlog "podset.dev/policy-sdk/internal/witpodset/podset_policy_log"
	_ "podset.dev/policy-sdk/internal/witpodset/wit_exports"
	"podset.dev/policy-sdk/podset"
)

// Serve makes p the component's policy, logging through the host's `log`.
func Serve(p podset.Policy) {
	podsetserved.Policy = &p
	podsetserved.Log = func(level policy.Level, message string) {
		hostlog.Log(hostlog.Level(level), message)
	}
	podsetserved.WarmUp()
}
