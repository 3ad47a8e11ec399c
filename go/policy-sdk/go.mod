module podset.dev/policy-sdk

go 1.25

require go.bytecodealliance.org/pkg v0.2.2
