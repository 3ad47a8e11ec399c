// Package podset is the contract's typed PodSet world (`podset-policy`): a policy over
// PodSets (`app.example.com/v1alpha1`) that reads typed pods and returns typed actions,
// with no JSON on either side. It is the fast path for that one kind; a policy over any
// other kind, or one that needs a child's whole object, uses package policy's
// `reconcile-policy` world.
//
// A policy is a Policy value; its Decide is an ordinary function, tested natively with
// `go test`. A component's main package serves it:
//
//	func init() { component.Serve(mypolicy.Policy) } // podset.dev/policy-sdk/podset/component
//
//	func main() {}
package podset

import (
	"time"

	policy "podset.dev/policy-sdk"
)

// Kind is the parent kind of every policy of this world; PodKind its children's.
var (
	Kind    = policy.Kind{Group: "app.example.com", Version: "v1alpha1", Kind: "PodSet"}
	PodKind = policy.Kind{Group: "", Version: "v1", Kind: "Pod"}
)

// Policy is a PodSet policy: who it is and its decision. Its declarations are the
// world's: PodSets, owning Pods.
type Policy struct {
	Name    string
	Version string
	// Decide is one decision: a pure function of in. Return a *policy.Error when it
	// cannot decide (any other error is reported with reason `Error`, a panic with
	// reason `Panic`).
	Decide func(in *Input, log policy.Logger) ([]Action, error)
}

// Input is everything a PodSet policy gets to decide from.
type Input struct {
	PodSet PodSet
	// Pods are the pods the PodSet controls (an owner reference with its UID,
	// `controller: true`).
	Pods     []Pod
	InFlight InFlight
	// Now is the host's clock when it observed the input: a policy has no clock of its own.
	Now time.Time
}

// PodSet is the PodSet being reconciled.
type PodSet struct {
	Name       string
	Namespace  string
	UID        string
	Generation int64
	Labels     map[string]string
	// Replicas is `spec.replicas`.
	Replicas int32
	// Status is the policy-owned part of the current status.
	Status Status
}

// Status is the part of `PodSet.status` a policy owns.
type Status struct {
	// PodNames are the names of the active pods, sorted.
	PodNames []string
	// AvailableReplicas counts the active pods whose Ready condition is True.
	AvailableReplicas int32
	// ObservedGeneration is the `metadata.generation` this status reflects.
	ObservedGeneration int64
	// Conditions are those the policy owns. Host-owned conditions (`PolicyFailed`) are
	// neither shown to the policy nor replaced by it.
	Conditions []Condition
}

// Condition is a status condition as a PodSet policy sees it. The host keeps
// `lastTransitionTime`: it is set when Status changes and preserved otherwise.
type Condition struct {
	Type string
	// Status is `True`, `False` or `Unknown`.
	Status  string
	Reason  string
	Message string
}

// Phase is a Pod's `status.phase`.
type Phase int

const (
	Pending Phase = iota
	Running
	Succeeded
	Failed
	Unknown
)

func (p Phase) String() string {
	switch p {
	case Pending:
		return "Pending"
	case Running:
		return "Running"
	case Succeeded:
		return "Succeeded"
	case Failed:
		return "Failed"
	}
	return "Unknown"
}

// Pod is a pod the PodSet controls: what a PodSet decision reads, and nothing more.
type Pod struct {
	Name  string
	Phase Phase
	// Ready: the pod's Ready condition is True.
	Ready bool
	// Deleting: `metadata.deletionTimestamp` is set; the pod is terminating.
	Deleting bool
	// Scheduled: `spec.nodeName` is set; the pod is bound to a node.
	Scheduled bool
	// CreatedAt is `metadata.creationTimestamp` (to the millisecond).
	CreatedAt time.Time
	// RestartCount is the sum of the containers' restart counts.
	RestartCount int32
}

// InFlight is work the host has issued but not yet seen in its cache (ReplicaSet-style
// expectations). A policy must count it, or a stale cache makes it act twice.
type InFlight struct {
	// Creations are pod creations issued and not yet observed.
	Creations uint32
	// Deletions are the names of pods whose deletion was issued and not yet observed.
	Deletions []string
}

// Action is what the host should do: a CreatePod, DeletePod, UpdateStatus or
// RequeueAfter.
type Action interface{ podsetAction() }

// CreatePod creates one pod from the PodSet's template, named Name, or GenerateName
// followed by a suffix the API server picks (exactly one of the two). The host adds the
// owner reference, the selector labels and the restricted security context.
type CreatePod struct {
	Name         string
	GenerateName string
	// Labels are added to the template's labels (selector labels always win).
	Labels map[string]string
	// Annotations are added to the template's annotations.
	Annotations map[string]string
}

// DeletePod deletes the named pod. The host refuses pods the PodSet does not control.
type DeletePod struct{ Name string }

// UpdateStatus replaces the policy-owned status. Asked for in a decision that also
// creates pods, it is folded into the next decision's: that one follows as soon as the
// pods are observed, and its status names them.
type UpdateStatus struct{ Status Status }

// RequeueAfter reconciles again after this long (to the millisecond) even if nothing
// changes.
type RequeueAfter struct{ After time.Duration }

func (CreatePod) podsetAction()    {}
func (DeletePod) podsetAction()    {}
func (UpdateStatus) podsetAction() {}
func (RequeueAfter) podsetAction() {}
