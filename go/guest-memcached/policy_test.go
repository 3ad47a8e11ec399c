// The decision, natively (`go test`): the Rust policy's unit tests, in Go.
package main

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/policytest"
)

func memcached(t *testing.T, size any, status any) policy.Object {
	return policytest.Object(t, Memcached, "cache", map[string]any{"spec": map[string]any{"size": size, "containerPort": 11211}, "status": status})
}

func pod(t *testing.T, name, phase string) policy.Object {
	p := policytest.Object(t, Pod, name, map[string]any{"status": map[string]string{"phase": phase}})
	return policytest.Labelled(policytest.Labelled(p, NameLabel, "memcached"), InstanceLabel, "cache")
}

// deploymentWith is a Deployment whose controller has acted on its spec (generation 1).
func deploymentWith(t *testing.T, replicas, ready int, generation int64) policy.Object {
	d := policytest.Object(t, Deployment, "cache", map[string]any{
		"spec":   map[string]any{"replicas": replicas},
		"status": map[string]any{"observedGeneration": 1, "replicas": replicas, "readyReplicas": ready, "updatedReplicas": replicas},
	})
	d.Meta.Generation = generation
	return d
}

func decide(t *testing.T, in *policy.Input) []policy.Action {
	t.Helper()
	actions, err := Decide(in, policy.Logger{})
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return actions
}

func statusOf(t *testing.T, actions []policy.Action) MemcachedStatus {
	t.Helper()
	var s MemcachedStatus
	if !policytest.StatusOf(t, actions, &s) {
		t.Fatalf("no status written: %+v", actions)
	}
	return s
}

func condition(t *testing.T, s MemcachedStatus, kind string) policy.Condition {
	t.Helper()
	c, ok := policy.FindCondition(s.Conditions, kind)
	if !ok {
		t.Fatalf("a %s condition in %+v", kind, s)
	}
	return c
}

func TestANewMemcachedGetsItsDeploymentAndACreatingStatus(t *testing.T) {
	actions := decide(t, policytest.Input(memcached(t, 3, map[string]any{})))
	if actions[0].Type != policy.ActApply {
		t.Fatalf("applies the Deployment first: %+v", actions)
	}
	d := policytest.Applied(t, actions)[0]
	spec := d["spec"].(map[string]any)
	if spec["replicas"] != 3.0 {
		t.Errorf("replicas: %v", spec["replicas"])
	}
	c := spec["template"].(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)
	want := []any{"memcached", "-p", "11211", "-m", "64", "-o", "modern", "-v"}
	if c["image"] != Image || !reflect.DeepEqual(c["command"], want) || c["securityContext"].(map[string]any)["runAsNonRoot"] != true {
		t.Errorf("container: %v", c)
	}
	if a := condition(t, statusOf(t, actions), "Available"); a.Status != "False" || a.Reason != "Creating" {
		t.Errorf("Available: %+v", a)
	}
}

func TestTheStatusListsThePodsAndAConvergedMemcachedCostsNothingButTheApply(t *testing.T) {
	in := policytest.Input(memcached(t, 2, map[string]any{}))
	in.Children = append(in.Children, deploymentWith(t, 2, 2, 1))
	in.Related = []policy.Object{pod(t, "cache-b", "Running"), pod(t, "cache-a", "Running"), pod(t, "cache-x", "Failed")}
	s := statusOf(t, decide(t, in))
	if !reflect.DeepEqual(s.Nodes, []string{"cache-a", "cache-b"}) {
		t.Errorf("nodes: %v", s.Nodes)
	}
	if !policy.IsTrue(s.Conditions, "Available") || policy.IsTrue(s.Conditions, "Progressing") {
		t.Errorf("conditions: %+v", s.Conditions)
	}
	// The status written, the next decision re-states the Deployment only.
	again := *in
	again.Parent = memcached(t, 2, s)
	again.Now = in.Now.Add(60_000_000_000)
	if actions := decide(t, &again); len(actions) != 1 || actions[0].Type != policy.ActApply {
		t.Errorf("converged: %+v", actions)
	}
}

func TestScalingIsProgressingUntilEveryPodIsReady(t *testing.T) {
	in := policytest.Input(memcached(t, 5, map[string]any{}))
	in.Children = append(in.Children, deploymentWith(t, 5, 3, 1))
	s := statusOf(t, decide(t, in))
	if a := condition(t, s, "Available"); a.Status != "False" || a.Reason != "Scaling" || a.Message != "Deployment cache is not yet ready at size 5" {
		t.Errorf("Available: %+v", a)
	}
	if !policy.IsTrue(s.Conditions, "Progressing") {
		t.Errorf("Progressing: %+v", s.Conditions)
	}
}

func TestADeploymentStatusOlderThanItsSpecIsStillProgressing(t *testing.T) {
	up := policytest.Input(memcached(t, 3, map[string]any{}))
	up.Children = append(up.Children, deploymentWith(t, 1, 1, 2))
	s := statusOf(t, decide(t, up))
	if p := condition(t, s, "Progressing"); p.Status != "True" || p.Reason != "Updating" || !strings.Contains(p.Message, "rolling out at size 3") {
		t.Errorf("Progressing: %+v", p)
	}
	if policy.IsTrue(s.Conditions, "Available") {
		t.Error("not Available at 1 of 3")
	}

	down := policytest.Input(memcached(t, 1, map[string]any{}))
	down.Children = append(down.Children, deploymentWith(t, 3, 3, 2))
	d := statusOf(t, decide(t, down))
	if !policy.IsTrue(d.Conditions, "Available") || !policy.IsTrue(d.Conditions, "Progressing") {
		t.Errorf("scaling down: %+v", d.Conditions)
	}
}

func TestDeletionRunsTheSeedsFinalizerFlow(t *testing.T) {
	actions := decide(t, policytest.Input(policytest.BeingDeleted(memcached(t, 3, map[string]any{}))))
	if d := condition(t, statusOf(t, actions), "Degraded"); d.Status != "True" || d.Reason != "Finalizing" {
		t.Errorf("Degraded: %+v", d)
	}
	event := false
	for _, a := range actions {
		event = event || (a.Type == policy.ActEmitEvent && a.Event.Reason == "Deleting" && a.Event.Type == policy.Warning)
		if a.Type == policy.ActApply {
			t.Error("nothing is applied while finalizing")
		}
	}
	if !event || actions[len(actions)-1].Type != policy.ActFinalizeDone {
		t.Errorf("a Deleting Event, and finalize-done last: %+v", actions)
	}
}

func TestASpecThatDoesNotParseIsAPolicyError(t *testing.T) {
	_, err := Decide(policytest.Input(memcached(t, "three", map[string]any{})), policy.Logger{})
	var e *policy.Error
	if !errors.As(err, &e) || e.Reason != "InvalidSpec" {
		t.Errorf("got %v", err)
	}
}
