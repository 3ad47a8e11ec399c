// The decision, natively (`go test`).
package main

import (
	"strings"
	"testing"

	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/policytest"
)

func TestANew{{Kind}}GetsItsConfigMapAndIsNotReadyYet(t *testing.T) {
	parent := policytest.Object(t, {{Kind}}, "sample", map[string]any{"spec": map[string]any{"data": map[string]string{"greeting": "hello"}}})
	actions, err := Decide(policytest.Input(parent), policy.Logger{})
	if err != nil {
		t.Fatal(err)
	}
	applied := policytest.Applied(t, actions)
	if len(applied) != 1 || !strings.Contains(applied[0]["data"].(map[string]any)["greeting"].(string), "hello") {
		t.Errorf("applies the ConfigMap first: %v", applied)
	}
	var status {{Kind}}Status
	if !policytest.StatusOf(t, actions, &status) {
		t.Fatal("no status written")
	}
	if c := status.Conditions[0]; c.Type != "Ready" || c.Status != "False" || c.Reason != "Syncing" {
		t.Errorf("Ready: %+v", c)
	}
}
