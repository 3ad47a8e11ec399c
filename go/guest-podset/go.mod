module podset.dev/guest-podset

go 1.25

require podset.dev/policy-sdk v0.0.0
