// Package export_podset_policy_podset is the `podset` export the generated wit_exports
// calls: the served PodSet policy's decision. (Written by hand: the generator leaves
// export packages to the component.)
package export_podset_policy_podset

import (
	witTypes "go.bytecodealliance.org/pkg/wit/types"
	"podset.dev/policy-sdk/internal/podsetserved"
	wit "podset.dev/policy-sdk/internal/witpodset/podset_policy_podset"
	types "podset.dev/policy-sdk/internal/witpodset/podset_policy_types"
)

func Decide(input wit.Input) witTypes.Result[[]wit.Action, types.PolicyError] {
	return podsetserved.Decide(input)
}
