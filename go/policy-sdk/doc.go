// Package policy writes a podset-host reconcile policy in Go: the contract's any-kind
// world (`reconcile-policy`). Package podset.dev/policy-sdk/podset writes one of its
// typed PodSet world (`podset-policy`).
//
// The contract is wit/policy.wit; its Go bindings are generated into internal/, a
// directory per world (`make go-bindings`, drift-checked by `make check`), and this
// package holds what a policy works with around them, so that a policy is a value:
//
//	var Policy = policy.Policy{Name: …, Version: …, Declares: …, Decide: decide}
//
// Decide is an ordinary function: unit-test it natively (`go test`) with inputs built
// by podset.dev/policy-sdk/policytest. The component's main package serves it:
//
//	func init() { component.Serve(mypolicy.Policy) }
//	func main() {}
//
// A decision must be a pure function of its input. The component has no clock and no
// randomness of its own: time.Now() reads a fixed instant (use Input.Now), and every
// fresh instance starts from the same snapshot, so map iteration and math/rand draw
// alike on every run.
package policy
