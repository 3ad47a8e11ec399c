// Package export_podset_policy_reconciler is the `reconciler` export the generated
// wit_exports calls: the served policy's decision. (Written by hand: the generator
// leaves export packages to the component.)
package export_podset_policy_reconciler

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"podset.dev/policy-sdk/internal/served"
	wit "podset.dev/policy-sdk/internal/wit/podset_policy_reconciler"
	types "podset.dev/policy-sdk/internal/wit/podset_policy_types"
)

func Decide(input wit.Input) witTypes.Result[[]wit.Action, types.PolicyError] {
	return served.Decide(input)
}
