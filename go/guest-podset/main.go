// The component's entry: the only file that imports podset.dev/policy-sdk/podset/component.
package main

import "podset.dev/policy-sdk/podset/component"

func init() { component.Serve(Policy) }

// main never runs: a policy component is a reactor, called through its exports.
func main() {}
