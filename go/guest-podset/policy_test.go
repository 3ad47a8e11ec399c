// The decision, natively (`go test`): the Rust policy's unit tests, in Go.
package main

import (
	"errors"
	"slices"
	"testing"
	"time"

	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/podset"
)

func pod(name string) podset.Pod {
	return podset.Pod{Name: name, Phase: podset.Running, Ready: true, Scheduled: true, CreatedAt: time.UnixMilli(1_000)}
}

func input(replicas int32, pods ...podset.Pod) *podset.Input {
	return &podset.Input{
		PodSet: podset.PodSet{Name: "web", Namespace: "default", UID: "u-web", Generation: 1, Replicas: replicas},
		Pods:   pods,
		Now:    time.UnixMilli(10_000),
	}
}

func decide(t *testing.T, in *podset.Input) []podset.Action {
	t.Helper()
	actions, err := Decide(in, policy.NewLogger(nil))
	if err != nil {
		t.Fatalf("decide: %v", err)
	}
	return actions
}

func creates(actions []podset.Action) int {
	n := 0
	for _, a := range actions {
		if _, ok := a.(podset.CreatePod); ok {
			n++
		}
	}
	return n
}

func deletes(actions []podset.Action) []string {
	var names []string
	for _, a := range actions {
		if d, ok := a.(podset.DeletePod); ok {
			names = append(names, d.Name)
		}
	}
	return names
}

func status(t *testing.T, actions []podset.Action) podset.Status {
	t.Helper()
	for _, a := range actions {
		if s, ok := a.(podset.UpdateStatus); ok {
			return s.Status
		}
	}
	t.Fatalf("no status update in %v", actions)
	return podset.Status{}
}

func TestScaleFromZeroCreatesEveryMissingPodInOnePass(t *testing.T) {
	a := decide(t, input(5))
	if creates(a) != 5 {
		t.Fatalf("creates %d pods, want 5: %v", creates(a), a)
	}
	s := status(t, a)
	if s.AvailableReplicas != 0 || s.ObservedGeneration != 1 || s.Conditions[0].Status != "False" {
		t.Fatalf("status %+v", s)
	}
	if c := a[0].(podset.CreatePod); c.GenerateName != "web-" || c.Name != "" {
		t.Fatalf("a created pod is named by the API server after the PodSet: %+v", c)
	}
}

func TestCreationsAreCappedPerPassAndARequeueAsked(t *testing.T) {
	a := decide(t, input(250))
	if creates(a) != MaxCreatesPerPass {
		t.Fatalf("creates %d pods, want %d", creates(a), MaxCreatesPerPass)
	}
	if !slices.Contains(a, podset.Action(podset.RequeueAfter{After: RequeueAfterCap})) {
		t.Fatalf("no requeue after a capped pass: %v", a)
	}
}

func TestInFlightCreationsCountAsPods(t *testing.T) {
	in := input(3, pod("a"))
	in.InFlight.Creations = 2
	if n := creates(decide(t, in)); n != 0 {
		t.Fatalf("creates %d with 1 pod and 2 in flight of 3", n)
	}
	in.InFlight.Creations = 1
	if n := creates(decide(t, in)); n != 1 {
		t.Fatalf("creates %d with 1 pod and 1 in flight of 3", n)
	}
}

func TestFailedSucceededAndTerminatingPodsDoNotCount(t *testing.T) {
	failed, done, leaving := pod("f"), pod("s"), pod("t")
	failed.Phase, done.Phase, leaving.Deleting = podset.Failed, podset.Succeeded, true
	a := decide(t, input(2, pod("a"), failed, done, leaving))
	if creates(a) != 1 || len(deletes(a)) != 0 {
		t.Fatalf("want one create and no delete (inactive pods are never deleted by the policy): %v", a)
	}
	if names := status(t, a).PodNames; !slices.Equal(names, []string{"a"}) {
		t.Fatalf("status names %v", names)
	}
}

func TestScaleDownFollowsReplicaSetRanking(t *testing.T) {
	unscheduled, pending, notReady, newer := pod("unscheduled"), pod("pending"), pod("not-ready"), pod("newer")
	unscheduled.Scheduled, unscheduled.Phase, unscheduled.Ready = false, podset.Pending, false
	pending.Phase, pending.Ready = podset.Pending, false
	notReady.Ready = false
	newer.CreatedAt = time.UnixMilli(5_000)
	a := decide(t, input(1, pod("older"), newer, notReady, pending, unscheduled))
	if got := deletes(a); !slices.Equal(got, []string{"unscheduled", "pending", "not-ready", "newer"}) {
		t.Fatalf("deletes %v", got)
	}
}

func TestAScaleDownsStatusNamesOnlyThePodsThatStay(t *testing.T) {
	in := input(1, pod("a"), pod("b"), pod("c"))
	in.InFlight.Deletions = []string{"c"}
	a := decide(t, in)
	s := status(t, a)
	var stay []string
	for _, n := range []string{"a", "b"} {
		if !slices.Contains(deletes(a), n) {
			stay = append(stay, n)
		}
	}
	if !slices.Equal(s.PodNames, stay) || s.AvailableReplicas != 1 || len(stay) != 1 {
		t.Fatalf("status %+v names neither the pod deleted now nor the one in flight: want %v", s, stay)
	}
	// Once the deletions are seen, the status written with them holds: nothing to do.
	in.PodSet.Status = s
	in.Pods = slices.DeleteFunc(in.Pods, func(p podset.Pod) bool { return !slices.Contains(stay, p.Name) })
	in.InFlight.Deletions = nil
	if a := decide(t, in); len(a) != 0 {
		t.Fatalf("converged, yet %v", a)
	}
}

func TestRestartsRankBeforeAge(t *testing.T) {
	flaky, newer := pod("flaky"), pod("newer")
	flaky.RestartCount = 4
	newer.CreatedAt = time.UnixMilli(9_000)
	if got := deletes(decide(t, input(1, newer, flaky))); !slices.Equal(got, []string{"flaky"}) {
		t.Fatalf("deletes %v", got)
	}
}

func TestInFlightDeletionsAreNotChosenAgainNorCounted(t *testing.T) {
	in := input(1, pod("a"), pod("b"), pod("c"))
	in.InFlight.Deletions = []string{"c"}
	got := deletes(decide(t, in))
	if len(got) != 1 || slices.Contains(got, "c") {
		t.Fatalf("deletes %v", got)
	}
}

func TestConvergedPodSetYieldsNoActions(t *testing.T) {
	in := input(2, pod("b"), pod("a"))
	in.PodSet.Status = status(t, decide(t, in))
	if a := decide(t, in); len(a) != 0 {
		t.Fatalf("converged, yet %v", a)
	}
}

func TestStatusNamesAreSortedAndCountReadyPodsOnly(t *testing.T) {
	warming := pod("b")
	warming.Ready = false
	s := status(t, decide(t, input(2, warming, pod("a"))))
	if !slices.Equal(s.PodNames, []string{"a", "b"}) || s.AvailableReplicas != 1 {
		t.Fatalf("status %+v", s)
	}
}

func TestNegativeReplicasIsAPolicyError(t *testing.T) {
	_, err := Decide(input(-1), policy.NewLogger(nil))
	var e *policy.Error
	if !errors.As(err, &e) || e.Reason != "InvalidReplicas" {
		t.Fatalf("error %v, want reason InvalidReplicas", err)
	}
}
