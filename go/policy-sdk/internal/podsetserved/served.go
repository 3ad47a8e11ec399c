// Package podsetserved holds the PodSet policy a component of the `podset-policy` world
// serves, and converts between that world's generated types (internal/witpodset) and
// package podset's.
package podsetserved

import (
	"math"
	"sort"
	"time"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/internal/decision"
	wit "podset.dev/policy-sdk/internal/witpodset/podset_policy_podset"
	types "podset.dev/policy-sdk/internal/witpodset/podset_policy_types"
	"podset.dev/policy-sdk/podset"
)

// Policy is what the component serves (set by component.Serve, in an init function:
// before the host's first call, and inside the build's snapshot).
var Policy *podset.Policy

// Log is the host's `log`.
var Log func(policy.Level, string)

// Info is the policy's identity: the world's declarations, PodSets owning Pods.
func Info() types.PolicyInfo {
	p := served()
	gvk := func(k policy.Kind) types.GroupVersionKind {
		return types.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
	}
	return types.PolicyInfo{
		Name:     p.Name,
		Version:  p.Version,
		Contract: policy.Contract,
		Declares: types.Declarations{
			Parent:    gvk(podset.Kind),
			Children:  []types.GroupVersionKind{gvk(podset.PodKind)},
			Related:   []types.RelatedKind{},
			Finalizer: witTypes.None[string](),
			Lookups:   []types.LookupKind{},
		},
	}
}

// Decide is one decision of the served policy: an error it returns, or a panic, is the
// decision's policy-error.
func Decide(in wit.Input) witTypes.Result[[]wit.Action, types.PolicyError] {
	out, failure := decision.Run(func() ([]podset.Action, error) {
		input := FromWit(in)
		return served().Decide(&input, policy.NewLogger(Log))
	}, ToWit)
	if failure != nil {
		return witTypes.Err[[]wit.Action](types.PolicyError{Reason: failure.Reason, Message: failure.Message})
	}
	return witTypes.Ok[[]wit.Action, types.PolicyError](out)
}

// WarmUp runs the policy once on a PodSet of one replica with one running pod, and
// converts what it returns, all discarded: run in an init function, the first-use work of
// what it calls (fmt's, sort's, the runtime's) lands in the build's snapshot, and every
// instance starts with it done. A policy is a pure function, so running it here changes
// nothing else.
func WarmUp() {
	defer func() { _ = recover() }()
	now := time.UnixMilli(0).UTC()
	in := podset.Input{
		PodSet: podset.PodSet{Name: "warm-up", Namespace: "warm-up", Generation: 2, Replicas: 2, Labels: map[string]string{}},
		Pods:   []podset.Pod{{Name: "warm-up-a", Phase: podset.Running, Ready: true, Scheduled: true, CreatedAt: now}},
		Now:    now,
	}
	actions, _ := served().Decide(&in, policy.NewLogger(nil))
	_, _ = ToWit(actions)
}

func served() *podset.Policy {
	if Policy == nil {
		panic("no policy served: call component.Serve(policy) in an init function of the main package")
	}
	return Policy
}

// phases are the contract's pod phases in package podset's terms, by the enum's value.
var phases = map[wit.PodPhase]podset.Phase{
	wit.PodPhasePending:   podset.Pending,
	wit.PodPhaseRunning:   podset.Running,
	wit.PodPhaseSucceeded: podset.Succeeded,
	wit.PodPhaseFailed:    podset.Failed,
	wit.PodPhaseUnknown:   podset.Unknown,
}

var conditionStatuses = map[types.ConditionStatus]string{
	types.ConditionStatusTrue:    "True",
	types.ConditionStatusFalse:   "False",
	types.ConditionStatusUnknown: "Unknown",
}

// FromWit is the input in package podset's types.
func FromWit(in wit.Input) podset.Input {
	p := in.Podset
	labels := make(map[string]string, len(p.Labels))
	for _, kv := range p.Labels {
		labels[kv.Key] = kv.Value
	}
	pods := make([]podset.Pod, len(in.Pods))
	for i, pod := range in.Pods {
		pods[i] = podset.Pod{
			Name:         pod.Name,
			Phase:        phases[pod.Phase],
			Ready:        pod.Ready,
			Deleting:     pod.Deleting,
			Scheduled:    pod.Scheduled,
			CreatedAt:    time.UnixMilli(pod.CreatedAt).UTC(),
			RestartCount: pod.RestartCount,
		}
	}
	conditions := make([]podset.Condition, len(p.Status.Conditions))
	for i, c := range p.Status.Conditions {
		conditions[i] = podset.Condition{Type: c.Type, Status: conditionStatuses[c.Status], Reason: c.Reason, Message: c.Message}
	}
	return podset.Input{
		PodSet: podset.PodSet{
			Name:       p.Name,
			Namespace:  p.Namespace,
			UID:        p.Uid,
			Generation: p.Generation,
			Labels:     labels,
			Replicas:   p.Replicas,
			Status: podset.Status{
				PodNames:           p.Status.PodNames,
				AvailableReplicas:  p.Status.AvailableReplicas,
				ObservedGeneration: p.Status.ObservedGeneration,
				Conditions:         conditions,
			},
		},
		Pods:     pods,
		InFlight: podset.InFlight{Creations: in.InFlight.Creations, Deletions: in.InFlight.Deletions},
		Now:      time.UnixMilli(in.Now).UTC(),
	}
}

// ToWit is the actions in the contract's types, or a policy error (reason
// `InvalidAction`) naming the first that has none.
func ToWit(actions []podset.Action) ([]wit.Action, error) {
	out := make([]wit.Action, 0, len(actions))
	for _, a := range actions {
		w, err := action(a)
		if err != nil {
			return nil, err
		}
		out = append(out, w)
	}
	return out, nil
}

func action(a podset.Action) (wit.Action, error) {
	switch a := a.(type) {
	case podset.CreatePod:
		if (a.Name == "") == (a.GenerateName == "") {
			return wit.Action{}, policy.Errorf("InvalidAction", "a pod to create needs exactly one of Name and GenerateName (got %q and %q)", a.Name, a.GenerateName)
		}
		name := wit.MakePodNameExact(a.Name)
		if a.GenerateName != "" {
			name = wit.MakePodNamePrefix(a.GenerateName)
		}
		return wit.MakeActionCreatePod(wit.CreatePod{Name: name, Labels: keyValues(a.Labels), Annotations: keyValues(a.Annotations)}), nil
	case podset.DeletePod:
		return wit.MakeActionDeletePod(a.Name), nil
	case podset.UpdateStatus:
		status, err := statusToWit(a.Status)
		if err != nil {
			return wit.Action{}, err
		}
		return wit.MakeActionUpdateStatus(status), nil
	case podset.RequeueAfter:
		millis := a.After.Milliseconds()
		if millis < 0 || millis > math.MaxUint32 {
			return wit.Action{}, policy.Errorf("InvalidAction", "requeue after %v: out of range (0 to %d ms)", a.After, uint32(math.MaxUint32))
		}
		return wit.MakeActionRequeueAfter(uint32(millis)), nil
	}
	return wit.Action{}, policy.Errorf("InvalidAction", "%T is not an action of the podset world", a)
}

func statusToWit(s podset.Status) (wit.PodsetStatus, error) {
	conditions := make([]types.Condition, len(s.Conditions))
	for i, c := range s.Conditions {
		var status types.ConditionStatus
		switch c.Status {
		case "True":
			status = types.ConditionStatusTrue
		case "False":
			status = types.ConditionStatusFalse
		case "Unknown":
			status = types.ConditionStatusUnknown
		default:
			return wit.PodsetStatus{}, policy.Errorf("InvalidAction", "condition %s: status %q is not True, False or Unknown", c.Type, c.Status)
		}
		conditions[i] = types.Condition{Type: c.Type, Status: status, Reason: c.Reason, Message: c.Message}
	}
	return wit.PodsetStatus{
		PodNames:           s.PodNames,
		AvailableReplicas:  s.AvailableReplicas,
		ObservedGeneration: s.ObservedGeneration,
		Conditions:         conditions,
	}, nil
}

// keyValues is a map as the contract's list, sorted by key: Go's map order is random,
// and the same decision must give the same actions.
func keyValues(m map[string]string) []types.KeyValue {
	out := make([]types.KeyValue, 0, len(m))
	for k, v := range m {
		out = append(out, types.KeyValue{Key: k, Value: v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}
