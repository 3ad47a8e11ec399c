// The default PodSet policy in Go, on the contract's typed PodSet world: it keeps
// `spec.replicas` active pods (Pending or Running, not terminating), scales down in
// ReplicaSet order, and reports status only when it changed. It decides what
// guest-podset/ (Rust) decides, on the same scenario files.
package main

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/podset"
)

const (
	// MaxCreatesPerPass is the most pods created in one decision. The rest follow on the
	// next reconcile, so one PodSet scaling up cannot flood the API server (the
	// ReplicaSet controller's burst cap plays the same role).
	MaxCreatesPerPass = 100
	// RequeueAfterCap is asked for when creations were capped, as a safety net: the host
	// also reconciles again as soon as it observes the pods it created.
	RequeueAfterCap = time.Second
	// Available is the condition reporting whether `spec.replicas` pods are ready.
	Available = "Available"
)

var Policy = podset.Policy{
	Name:    "guest-podset-go",
	Version: "0.1.0",
	Decide:  Decide,
}

// active tells whether p counts towards `spec.replicas`: Pending or Running and not
// terminating. Failed and Succeeded pods never run again; a terminating pod is leaving.
func active(p *podset.Pod) bool {
	return (p.Phase == podset.Pending || p.Phase == podset.Running) && !p.Deleting
}

func Decide(in *podset.Input, log policy.Logger) ([]podset.Action, error) {
	ps := &in.PodSet
	if ps.Replicas < 0 {
		return nil, policy.Errorf("InvalidReplicas", "spec.replicas is %d, must not be negative", ps.Replicas)
	}
	desired := int(ps.Replicas)

	// A deletion the host issued but has not yet observed still shows an active pod in
	// its cache. That pod is going away: neither count it nor pick it again.
	deleting := make(map[string]bool, len(in.InFlight.Deletions))
	for _, name := range in.InFlight.Deletions {
		deleting[name] = true
	}
	var staying []*podset.Pod
	for i := range in.Pods {
		if p := &in.Pods[i]; active(p) && !deleting[p.Name] {
			staying = append(staying, p)
		}
	}
	expected := len(staying) + int(in.InFlight.Creations)

	var actions []podset.Action
	switch {
	case expected < desired:
		missing := desired - expected
		now := min(missing, MaxCreatesPerPass)
		for range now {
			actions = append(actions, podset.CreatePod{GenerateName: ps.Name + "-"})
		}
		if missing > now {
			actions = append(actions, podset.RequeueAfter{After: RequeueAfterCap})
		}
	case expected > desired:
		// In-flight creations cannot be deleted; only observed pods can go.
		surplus := min(expected-desired, len(staying))
		slices.SortFunc(staying, deletionOrder)
		for _, p := range staying[:surplus] {
			actions = append(actions, podset.DeletePod{Name: p.Name})
		}
		staying = staying[surplus:]
	}

	// The status names the pods that stay: not those this decision deletes, nor those
	// whose deletion is in flight (guest-podset/src/decide.rs says why).
	if status, changed := changedStatus(in, staying); changed {
		actions = append(actions, podset.UpdateStatus{Status: status})
	}
	if len(actions) > 0 {
		log.Debugf("%s/%s: %d action(s)", ps.Namespace, ps.Name, len(actions))
	}
	return actions, nil
}

// changedStatus is the status that describes the pods that stay, and whether it differs
// from the current one.
func changedStatus(in *podset.Input, staying []*podset.Pod) (podset.Status, bool) {
	names := make([]string, 0, len(staying))
	ready := int32(0)
	for _, p := range staying {
		names = append(names, p.Name)
		if p.Ready {
			ready++
		}
	}
	slices.Sort(names)
	replicas := in.PodSet.Replicas
	condition := podset.Condition{
		Type:    Available,
		Status:  "False",
		Reason:  "MinimumReplicasUnavailable",
		Message: fmt.Sprintf("%d of %d pods ready", ready, replicas),
	}
	if ready >= replicas {
		condition.Status, condition.Reason = "True", "MinimumReplicasAvailable"
	}
	current := &in.PodSet.Status
	same := slices.Equal(current.PodNames, names) &&
		current.AvailableReplicas == ready &&
		current.ObservedGeneration == in.PodSet.Generation &&
		slices.Equal(current.Conditions, []podset.Condition{condition})
	return podset.Status{
		PodNames:           names,
		AvailableReplicas:  ready,
		ObservedGeneration: in.PodSet.Generation,
		Conditions:         []podset.Condition{condition},
	}, !same
}

// deletionOrder is the ReplicaSet controller's scale-down order: the pod that is cheapest
// to lose first. Unscheduled before scheduled, Pending before Unknown before Running, not
// ready before ready, more restarts before fewer, newer before older; the name breaks
// ties so the decision is deterministic.
func deletionOrder(a, b *podset.Pod) int {
	return cmp.Or(
		cmp.Compare(rank(a.Scheduled), rank(b.Scheduled)),
		cmp.Compare(phaseRank(a.Phase), phaseRank(b.Phase)),
		cmp.Compare(rank(a.Ready), rank(b.Ready)),
		cmp.Compare(b.RestartCount, a.RestartCount),
		b.CreatedAt.Compare(a.CreatedAt),
		cmp.Compare(a.Name, b.Name),
	)
}

func rank(b bool) int {
	if b {
		return 1
	}
	return 0
}

func phaseRank(p podset.Phase) int {
	switch p {
	case podset.Pending:
		return 0
	case podset.Unknown:
		return 1
	case podset.Running:
		return 2
	}
	return 3
}
