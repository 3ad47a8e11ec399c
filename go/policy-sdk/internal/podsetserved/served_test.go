package podsetserved

import (
	"strings"
	"testing"
	"time"

	policy "podset.dev/policy-sdk"
	wit "podset.dev/policy-sdk/internal/witpodset/podset_policy_podset"
	types "podset.dev/policy-sdk/internal/witpodset/podset_policy_types"
	"podset.dev/policy-sdk/podset"
)

func witInput() wit.Input {
	return wit.Input{
		Podset: wit.Podset{
			Name: "web", Namespace: "ns", Uid: "u", Generation: 3, Replicas: 2,
			Labels: []types.KeyValue{{Key: "app", Value: "web"}},
			Status: wit.PodsetStatus{
				PodNames: []string{"web-a"}, AvailableReplicas: 1, ObservedGeneration: 2,
				Conditions: []types.Condition{{Type: "Available", Status: types.ConditionStatusUnknown, Reason: "R", Message: "m"}},
			},
		},
		Pods: []wit.Pod{
			{Name: "web-a", Phase: wit.PodPhaseRunning, Ready: true, Scheduled: true, CreatedAt: 1_700_000_000_000, RestartCount: 2},
			{Name: "web-b", Phase: wit.PodPhaseUnknown, Deleting: true, CreatedAt: 1_700_000_000_500},
		},
		InFlight: wit.InFlight{Creations: 1, Deletions: []string{"web-c"}},
		Now:      1_700_000_100_000,
	}
}

func serve(t *testing.T, decide func(*podset.Input, policy.Logger) ([]podset.Action, error)) {
	old := Policy
	Policy = &podset.Policy{Name: "test", Version: "1", Decide: decide}
	t.Cleanup(func() { Policy = old })
}

func TestTheInputReachesTheDecisionWithTheSDKsTypes(t *testing.T) {
	var seen podset.Input
	serve(t, func(in *podset.Input, _ policy.Logger) ([]podset.Action, error) { seen = *in; return nil, nil })
	if r := Decide(witInput()); r.IsErr() {
		t.Fatalf("decide: %+v", r.Err())
	}
	p := seen.PodSet
	if p.Labels["app"] != "web" || p.UID != "u" || p.Generation != 3 || p.Replicas != 2 {
		t.Errorf("podset: %+v", p)
	}
	if s := p.Status; s.ObservedGeneration != 2 || s.Conditions[0] != (podset.Condition{Type: "Available", Status: "Unknown", Reason: "R", Message: "m"}) {
		t.Errorf("status: %+v", s)
	}
	a, b := seen.Pods[0], seen.Pods[1]
	if a.Phase != podset.Running || !a.Ready || a.RestartCount != 2 || a.CreatedAt.UnixMilli() != 1_700_000_000_000 {
		t.Errorf("pod a: %+v", a)
	}
	if b.Phase != podset.Unknown || !b.Deleting || b.Scheduled {
		t.Errorf("pod b: %+v", b)
	}
	if seen.InFlight.Creations != 1 || seen.InFlight.Deletions[0] != "web-c" || !seen.Now.Equal(time.UnixMilli(1_700_000_100_000)) {
		t.Errorf("in flight %+v, now %v", seen.InFlight, seen.Now)
	}
}

func TestEveryActionCrossesTheBoundary(t *testing.T) {
	serve(t, func(*podset.Input, policy.Logger) ([]podset.Action, error) {
		return []podset.Action{
			podset.CreatePod{GenerateName: "web-", Labels: map[string]string{"b": "2", "a": "1", "c": "3"}},
			podset.CreatePod{Name: "web-0", Annotations: map[string]string{"x": "y"}},
			podset.DeletePod{Name: "web-a"},
			podset.UpdateStatus{Status: podset.Status{PodNames: []string{"web-a"}, AvailableReplicas: 1, ObservedGeneration: 3,
				Conditions: []podset.Condition{{Type: "Available", Status: "True", Reason: "Ok", Message: "1 of 1"}}}},
			podset.RequeueAfter{After: 1500 * time.Millisecond},
		}, nil
	})
	r := Decide(witInput())
	if r.IsErr() {
		t.Fatalf("decide: %+v", r.Err())
	}
	out := r.Ok()
	create := out[0].CreatePod()
	if create.Name.Tag() != wit.PodNamePrefix || create.Name.Prefix() != "web-" {
		t.Errorf("generated name: %+v", create.Name)
	}
	var keys []string
	for _, kv := range create.Labels {
		keys = append(keys, kv.Key)
	}
	if strings.Join(keys, ",") != "a,b,c" {
		t.Errorf("labels in key order, whatever the map's: %v", keys)
	}
	if exact := out[1].CreatePod(); exact.Name.Exact() != "web-0" || exact.Annotations[0] != (types.KeyValue{Key: "x", Value: "y"}) {
		t.Errorf("exact name: %+v", exact)
	}
	if out[2].DeletePod() != "web-a" {
		t.Errorf("delete: %+v", out[2])
	}
	if s := out[3].UpdateStatus(); s.ObservedGeneration != 3 || s.Conditions[0].Status != types.ConditionStatusTrue {
		t.Errorf("status: %+v", s)
	}
	if out[4].RequeueAfter() != 1500 {
		t.Errorf("requeue: %+v", out[4])
	}
}

func TestABadActionIsAPolicyErrorNotAPanic(t *testing.T) {
	for name, action := range map[string]podset.Action{
		"both names":        podset.CreatePod{Name: "a", GenerateName: "b-"},
		"no name":           podset.CreatePod{},
		"lower-case status": podset.UpdateStatus{Status: podset.Status{Conditions: []podset.Condition{{Type: "Ready", Status: "true"}}}},
		"negative requeue":  podset.RequeueAfter{After: -time.Second},
		"nil":               nil,
	} {
		serve(t, func(*podset.Input, policy.Logger) ([]podset.Action, error) { return []podset.Action{action}, nil })
		r := Decide(witInput())
		if !r.IsErr() || r.Err().Reason != "InvalidAction" {
			t.Errorf("%s: %+v", name, r)
		}
	}
}

func TestErrorsAndPanicsArePolicyErrors(t *testing.T) {
	serve(t, func(*podset.Input, policy.Logger) ([]podset.Action, error) {
		return nil, policy.Errorf("InvalidReplicas", "spec.replicas is -1")
	})
	if r := Decide(witInput()); !r.IsErr() || r.Err() != (types.PolicyError{Reason: "InvalidReplicas", Message: "spec.replicas is -1"}) {
		t.Errorf("policy error: %+v", r)
	}
	serve(t, func(in *podset.Input, _ policy.Logger) ([]podset.Action, error) {
		return []podset.Action{[]podset.Action{}[in.PodSet.Replicas]}, nil
	})
	if r := Decide(witInput()); !r.IsErr() || r.Err().Reason != "Panic" || !strings.Contains(r.Err().Message, "index out of range") {
		t.Errorf("panic: %+v", r)
	}
}

func TestIdentityIsTheWorlds(t *testing.T) {
	serve(t, func(*podset.Input, policy.Logger) ([]podset.Action, error) { return nil, nil })
	info := Info()
	if info.Contract != policy.Contract || info.Declares.Parent.Kind != "PodSet" || info.Declares.Children[0].Kind != "Pod" {
		t.Errorf("info: %+v", info)
	}
}
