// Package export_podset_policy_identity is the `identity` export the generated
// wit_exports of the podset-policy world calls: the served PodSet policy's. (Written by
// hand: the generator leaves export packages to the component.)
package export_podset_policy_identity

import (
	"podset.dev/policy-sdk/internal/podsetserved"
	types "podset.dev/policy-sdk/internal/witpodset/podset_policy_types"
)

func Info() types.PolicyInfo { return podsetserved.Info() }
