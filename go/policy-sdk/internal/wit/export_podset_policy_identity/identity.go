// Package export_podset_policy_identity is the `identity` export the generated
// wit_exports calls: the served policy's. (Written by hand: the generator leaves export
// packages to the component.)
package export_podset_policy_identity

import (
	"podset.dev/policy-sdk/internal/served"
	types "podset.dev/policy-sdk/internal/wit/podset_policy_types"
)

func Info() types.PolicyInfo { return served.Info() }
