package served

import (
	"errors"
	"strings"
	"testing"
	"time"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	policy "podset.dev/policy-sdk"
	wit "podset.dev/policy-sdk/internal/wit/podset_policy_reconciler"
	types "podset.dev/policy-sdk/internal/wit/podset_policy_types"
)

var configMap = policy.Kind{Version: "v1", Kind: "ConfigMap"}

func witInput() wit.Input {
	kvs := []types.KeyValue{{Key: "app", Value: "web"}}
	return wit.Input{
		Parent: wit.Object{
			Kind: types.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Meta: wit.ObjectMeta{Name: "p", Namespace: "ns", Uid: "u", Generation: 3, Labels: kvs, CreatedAt: 1_700_000_000_000},
			Body: `{"data":{"k":"v"}}`,
		},
		LookedUp: []wit.Answer{{Lookup: wit.Lookup{
			Kind:  types.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
			Match: wit.MakeLookupMatchLabels(kvs),
		}}},
		Now: 1_700_000_100_000,
	}
}

func serve(t *testing.T, decide func(*policy.Input, policy.Logger) ([]policy.Action, error)) {
	old := Policy
	Policy = &policy.Policy{Name: "test", Version: "1", Declares: policy.Declarations{Parent: configMap, Finalizer: "f"}, Decide: decide}
	t.Cleanup(func() { Policy = old })
}

func TestTheInputReachesTheDecisionWithTheSDKsTypes(t *testing.T) {
	var seen policy.Input
	serve(t, func(in *policy.Input, _ policy.Logger) ([]policy.Action, error) { seen = *in; return nil, nil })
	if r := Decide(witInput()); r.IsErr() {
		t.Fatalf("decide: %+v", r.Err())
	}
	if seen.Parent.Meta.Labels["app"] != "web" || seen.Parent.Meta.UID != "u" || seen.Parent.Meta.Generation != 3 {
		t.Errorf("meta: %+v", seen.Parent.Meta)
	}
	if !seen.Now.Equal(time.UnixMilli(1_700_000_100_000)) || seen.Parent.Meta.CreatedAt.UnixMilli() != 1_700_000_000_000 {
		t.Errorf("times: %v %v", seen.Now, seen.Parent.Meta.CreatedAt)
	}
	if l := seen.LookedUp[0].Lookup; len(l.Labels) != 1 || l.Labels[0] != (policy.Label{Key: "app", Value: "web"}) {
		t.Errorf("lookup: %+v", l)
	}
}

func TestEveryActionCrossesTheBoundary(t *testing.T) {
	key := configMap.Key("c")
	serve(t, func(*policy.Input, policy.Logger) ([]policy.Action, error) {
		return []policy.Action{
			policy.Create(map[string]string{"kind": "ConfigMap"}),
			policy.Apply(map[string]string{"kind": "ConfigMap"}),
			policy.Delete(configMap, "c"),
			policy.UpdateStatus(map[string]int{"n": 1}),
			policy.EmitEvent(policy.Warning, "Why", "what", &key),
			policy.RequeueAfter(1500 * time.Millisecond),
			policy.FinalizeDone(),
			{Type: policy.ActLookUp, Lookup: policy.Lookup{Kind: configMap, Labels: []policy.Label{{Key: "b"}, {Key: "a"}}}},
		}, nil
	})
	r := Decide(witInput())
	if r.IsErr() {
		t.Fatalf("decide: %+v", r.Err())
	}
	a := r.Ok()
	if a[0].Create() != `{"kind":"ConfigMap"}` || a[3].UpdateStatus() != `{"n":1}` || a[2].Delete().Name != "c" {
		t.Errorf("objects: %q %q %+v", a[0].Create(), a[3].UpdateStatus(), a[2].Delete())
	}
	if e := a[4].EmitEvent(); e.Type != wit.EventTypeWarning || e.Regarding.Some().Name != "c" {
		t.Errorf("event: %+v", e)
	}
	if a[5].RequeueAfter() != 1500 || a[6].Tag() != wit.ActionFinalizeDone {
		t.Errorf("requeue %d, tag %d", a[5].RequeueAfter(), a[6].Tag())
	}
	if labels := a[7].LookUp().Match.Labels(); labels[0].Key != "a" {
		t.Errorf("lookup labels sorted: %+v", labels)
	}
}

func TestErrorsAndPanicsArePolicyErrors(t *testing.T) {
	cases := []struct {
		decide func() ([]policy.Action, error)
		want   types.PolicyError
	}{
		{func() ([]policy.Action, error) { return nil, policy.Errorf("InvalidSpec", "size %d", -1) }, types.PolicyError{Reason: "InvalidSpec", Message: "size -1"}},
		{func() ([]policy.Action, error) { return nil, errors.New("plain") }, types.PolicyError{Reason: "Error", Message: "plain"}},
		{func() ([]policy.Action, error) { var m map[string]int; m["x"] = 1; return nil, nil }, types.PolicyError{Reason: "Panic", Message: "assignment to entry in nil map"}},
		{func() ([]policy.Action, error) { return []policy.Action{policy.Apply(func() {})}, nil }, types.PolicyError{Reason: "InvalidAction"}},
		{func() ([]policy.Action, error) { return []policy.Action{policy.RequeueAfter(-time.Second)}, nil }, types.PolicyError{Reason: "InvalidAction"}},
	}
	for _, c := range cases {
		serve(t, func(*policy.Input, policy.Logger) ([]policy.Action, error) { return c.decide() })
		r := Decide(witInput())
		if !r.IsErr() || r.Err().Reason != c.want.Reason || !strings.Contains(r.Err().Message, c.want.Message) {
			t.Errorf("want %+v, got %+v", c.want, r)
		}
	}
}

func TestInfoSaysTheContractAndTheDeclarations(t *testing.T) {
	serve(t, nil)
	Policy.Declares.Related = []policy.RelatedKind{{Kind: configMap, Selector: []policy.LabelRequirement{
		{Key: "a", Exact: "x"}, {Key: "b", ParentName: true}, {Key: "c", ParentLabel: "team"},
	}}}
	info := Info()
	if info.Contract != policy.Contract || info.Declares.Finalizer != witTypes.Some("f") {
		t.Errorf("info: %+v", info)
	}
	s := info.Declares.Related[0].Selector
	if s[0].Value.Exact() != "x" || s[1].Value.Tag() != types.SelectorValueParentName || s[2].Value.ParentLabel() != "team" {
		t.Errorf("selector: %+v", s)
	}
}

func TestWarmUpDecidesOnceOnAnEmptyParentAndSwallowsWhatGoesWrong(t *testing.T) {
	var seen []policy.Input
	serve(t, func(in *policy.Input, _ policy.Logger) ([]policy.Action, error) {
		seen = append(seen, *in)
		return []policy.Action{policy.Apply(map[string]string{"kind": "ConfigMap"})}, nil
	})
	WarmUp()
	if len(seen) != 1 || seen[0].Parent.Kind != configMap || string(seen[0].Parent.Body) != "{}" {
		t.Errorf("one decision on an empty parent of the declared kind: %+v", seen)
	}
	serve(t, func(*policy.Input, policy.Logger) ([]policy.Action, error) { panic("not on an empty parent") })
	WarmUp() // a policy that cannot decide on an empty parent stops nothing
}
