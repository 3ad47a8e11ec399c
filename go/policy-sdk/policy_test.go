package policy_test

import (
	"errors"
	"testing"
	"time"

	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/policytest"
)

var configMap = policy.Kind{Group: "", Version: "v1", Kind: "ConfigMap"}

func TestAPIVersionOfTheCoreGroupIsTheVersion(t *testing.T) {
	if got := configMap.APIVersion(); got != "v1" {
		t.Errorf("core group: %q", got)
	}
	if got := (policy.Kind{Group: "apps", Version: "v1", Kind: "Deployment"}).APIVersion(); got != "apps/v1" {
		t.Errorf("apps group: %q", got)
	}
}

func TestSetConditionKeepsTheTransitionTimeWhileTheStatusHolds(t *testing.T) {
	first := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	later := first.Add(time.Hour)
	conditions := policy.SetCondition(nil, policy.NewCondition("Ready", false, "Waiting", "", first, 1))
	conditions = policy.SetCondition(conditions, policy.NewCondition("Available", true, "Up", "", first, 1))
	if conditions[0].Type != "Available" || len(conditions) != 2 {
		t.Fatalf("one per type, sorted by type: %+v", conditions)
	}
	same := policy.SetCondition(conditions, policy.NewCondition("Ready", false, "StillWaiting", "m", later, 2))
	ready, _ := policy.FindCondition(same, "Ready")
	if ready.LastTransitionTime != "2026-11-01T10:00:00Z" || ready.Reason != "StillWaiting" || ready.ObservedGeneration != 2 {
		t.Errorf("same status: the old transition time, the new reason and generation: %+v", ready)
	}
	flipped := policy.SetCondition(same, policy.NewCondition("Ready", true, "Done", "", later, 2))
	if ready, _ := policy.FindCondition(flipped, "Ready"); ready.LastTransitionTime != "2026-11-01T11:00:00Z" {
		t.Errorf("a new status moves the transition time: %+v", ready)
	}
	if !policy.IsTrue(flipped, "Ready") || policy.IsTrue(flipped, "Missing") {
		t.Errorf("IsTrue: %+v", flipped)
	}
}

func TestUpdateFromWritesOnlyAChangedStatus(t *testing.T) {
	current := map[string]any{"b": 1, "a": []string{"x"}}
	type status struct {
		A []string `json:"a"`
		B int      `json:"b"`
	}
	none, err := policy.UpdateFrom(status{A: []string{"x"}, B: 1}, current)
	if err != nil || len(none) != 0 {
		t.Errorf("equal as JSON (keys in another order): %v %v", none, err)
	}
	one, err := policy.UpdateFrom(status{A: []string{"y"}, B: 1}, current)
	if err != nil || len(one) != 1 || one[0].Type != policy.ActUpdateStatus {
		t.Errorf("changed: %v %v", one, err)
	}
	if _, err := policy.UpdateFrom(func() {}, current); err == nil {
		t.Error("a status that is no JSON is an error")
	}
}

func TestLookupsReadAnswersAndNameEveryLookupAsked(t *testing.T) {
	in := policytest.Input(policytest.Object(t, configMap, "parent", map[string]any{}))
	settings := policytest.Object(t, configMap, "settings", map[string]any{"data": map[string]string{"k": "v"}})
	in.LookedUp = []policy.Answer{{Lookup: policy.Lookup{Kind: configMap, Name: "settings"}, Objects: []policy.Object{settings}}}

	lookups := policy.NewLookups(in)
	found, ok := lookups.Named(configMap, "settings", "")
	if !ok || found.Meta.Name != "settings" || !lookups.Answered() {
		t.Fatalf("an answered lookup: %v %v", found, ok)
	}
	if got := lookups.Labelled(configMap, map[string]string{"b": "2", "a": "1"}); got != nil {
		t.Errorf("an unanswered lookup reads as nothing found: %v", got)
	}
	if lookups.Answered() {
		t.Error("one lookup has no answer yet")
	}
	actions := lookups.Finish()
	if len(actions) != 2 || actions[0].Lookup.Name != "settings" {
		t.Fatalf("both lookups named: %+v", actions)
	}
	if labels := actions[1].Lookup.Labels; len(labels) != 2 || labels[0].Key != "a" || labels[1].Key != "b" {
		t.Errorf("labels sorted by key, so the lookup is the same on every call: %+v", labels)
	}
}

func TestDecodeOfABodyThatDoesNotFitIsAnInvalidObjectError(t *testing.T) {
	o := policytest.Object(t, configMap, "c", map[string]any{"spec": "not an object"})
	var v struct {
		Spec struct{ Size int } `json:"spec"`
	}
	var e *policy.Error
	if err := o.Decode(&v); !errors.As(err, &e) || e.Reason != "InvalidObject" {
		t.Errorf("got %v", err)
	}
}

func TestInputFindsChildrenByKindAndName(t *testing.T) {
	in := policytest.Input(policytest.Object(t, configMap, "parent", map[string]any{}))
	secret := policy.Kind{Version: "v1", Kind: "Secret"}
	in.Children = []policy.Object{policytest.Object(t, configMap, "a", nil), policytest.Object(t, secret, "a", nil)}
	in.InFlight.Creations = []policy.ObjectKey{secret.Key("b")}
	if c, ok := in.Child(secret, "a"); !ok || c.Kind != secret {
		t.Errorf("the Secret a: %v %v", c, ok)
	}
	if len(in.ChildrenOf(configMap)) != 1 || !in.Creating(secret, "b") || in.Creating(configMap, "b") {
		t.Error("children and creations are told apart by kind")
	}
}

func TestInWaveAddsTheAnnotationToACopy(t *testing.T) {
	original := map[string]string{"keep": "me"}
	got := policy.InWave(original, 2)
	if got[policy.Wave] != "2" || got["keep"] != "me" || len(original) != 1 {
		t.Errorf("got %v, original %v", got, original)
	}
}
