// Package policytest builds inputs for native unit tests of a policy (`go test`), the
// way the host builds them, and reads the actions a decision returns.
package policytest

import (
	"encoding/json"
	"testing"
	"time"

	policy "podset.dev/policy-sdk"
)

// Created is when every object of Object was created; Now is every Input's clock.
var (
	Created = time.UnixMilli(1_700_000_000_000).UTC()
	Now     = time.UnixMilli(1_700_000_100_000).UTC()
)

// Object is an object of kind k named name in namespace `default`, with body (spec,
// status, …) as its JSON body. A body that does not marshal fails the test.
func Object(t testing.TB, k policy.Kind, name string, body any) policy.Object {
	t.Helper()
	text, err := json.Marshal(body)
	if err != nil {
		t.Fatalf("the body of %s %s: %v", k.Kind, name, err)
	}
	return policy.Object{
		Kind: k,
		Meta: policy.Meta{
			Name:            name,
			Namespace:       "default",
			UID:             "uid-" + name,
			Generation:      1,
			ResourceVersion: "1",
			Labels:          map[string]string{},
			Annotations:     map[string]string{},
			CreatedAt:       Created,
		},
		Body: text,
	}
}

// Labelled is o with one more label.
func Labelled(o policy.Object, key, value string) policy.Object {
	labels := make(map[string]string, len(o.Meta.Labels)+1)
	for k, v := range o.Meta.Labels {
		labels[k] = v
	}
	labels[key] = value
	o.Meta.Labels = labels
	return o
}

// BeingDeleted is o with its deletion timestamp set.
func BeingDeleted(o policy.Object) policy.Object {
	o.Meta.Deleting = true
	return o
}

// Input is an input for parent with nothing else observed, at Now.
func Input(parent policy.Object) *policy.Input {
	return &policy.Input{Parent: parent, Now: Now}
}

// StatusOf decodes the status a decision writes into v, and tells whether it writes one.
func StatusOf(t testing.TB, actions []policy.Action, v any) bool {
	t.Helper()
	for _, a := range actions {
		if a.Type == policy.ActUpdateStatus {
			roundTrip(t, a.Object, v)
			return true
		}
	}
	return false
}

// Applied returns the objects a decision applies, as JSON values.
func Applied(t testing.TB, actions []policy.Action) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, a := range actions {
		if a.Type == policy.ActApply {
			var o map[string]any
			roundTrip(t, a.Object, &o)
			out = append(out, o)
		}
	}
	return out
}

// Line is one line a policy logged.
type Line struct {
	Level   policy.Level
	Message string
}

// Recorder is a logger that keeps every line in *lines.
func Recorder() (policy.Logger, *[]Line) {
	lines := &[]Line{}
	return policy.NewLogger(func(level policy.Level, message string) {
		*lines = append(*lines, Line{Level: level, Message: message})
	}), lines
}

func roundTrip(t testing.TB, from, to any) {
	t.Helper()
	text, err := json.Marshal(from)
	if err != nil {
		t.Fatalf("encoding %T: %v", from, err)
	}
	if err := json.Unmarshal(text, to); err != nil {
		t.Fatalf("decoding %s into %T: %v", text, to, err)
	}
}
