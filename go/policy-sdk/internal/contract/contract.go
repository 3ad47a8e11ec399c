// Generated from the WIT package's version by go-bindgen: do not edit.

// Package contract is the version of the contract these bindings are of.
package contract

const Version = "0.4.0"
