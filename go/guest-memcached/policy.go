// The operator-sdk Memcached operator as a reconcile policy, in Go: a `Memcached` owns a
// Deployment of memcached pods, kept at `spec.size`, with its status filled from the
// Deployment and its pods, and the seed's finalizer flow on deletion. It decides what
// guest-memcached/ (Rust) decides, on the same scenario files.
package main

import (
	"fmt"
	"sort"
	"strconv"

	policy "podset.dev/policy-sdk"
)

var (
	Memcached  = policy.Kind{Group: "cache.example.com", Version: "v1alpha1", Kind: "Memcached"}
	Deployment = policy.Kind{Group: "apps", Version: "v1", Kind: "Deployment"}
	Pod        = policy.Kind{Group: "", Version: "v1", Kind: "Pod"}
)

const (
	// Finalizer is the seed's finalizer.
	Finalizer = "cache.example.com/finalizer"
	// NameLabel and InstanceLabel are on every memcached pod; the related pods are
	// selected by them.
	NameLabel     = "app.kubernetes.io/name"
	InstanceLabel = "app.kubernetes.io/instance"
	// Image is the image the seed runs, built locally for the embedded cluster.
	Image = "memcached:1.6.18"
	// runAsUser is a non-root user for memcached (the seed's choice).
	runAsUser = 1001
)

var Policy = policy.Policy{
	Name:    "guest-memcached-go",
	Version: "0.1.0",
	Declares: policy.Declarations{
		Parent:   Memcached,
		Children: []policy.Kind{Deployment},
		Related: []policy.RelatedKind{{
			Kind: Pod,
			Selector: []policy.LabelRequirement{
				{Key: NameLabel, Exact: "memcached"},
				{Key: InstanceLabel, ParentName: true},
			},
		}},
		Finalizer: Finalizer,
	},
	Decide: Decide,
}

// MemcachedSpec is a memcached cluster: a Deployment of Size memcached pods (the CRD:
// manifests/crd/memcached.yaml).
type MemcachedSpec struct {
	Size          int
	ContainerPort int
}

// MemcachedStatus is what the policy observed. Empty lists are left out, as the CRD's
// writers leave them out.
type MemcachedStatus struct {
	Conditions []policy.Condition `json:"conditions,omitempty"`
	// Nodes are the names of the memcached pods, sorted.
	Nodes []string `json:"nodes,omitempty"`
}

func Decide(in *policy.Input, _ policy.Logger) ([]policy.Action, error) {
	wanted, err := memcachedSpec(&in.Parent)
	if err != nil {
		return nil, err
	}
	var parent struct {
		Status MemcachedStatus `json:"status"`
	}
	if err := in.Parent.Decode(&parent); err != nil {
		return nil, err
	}
	current := parent.Status
	if in.Parent.Meta.Deleting {
		return finalize(in, current)
	}
	next, err := observedStatus(in, wanted, current)
	if err != nil {
		return nil, err
	}
	status, err := policy.UpdateFrom(next, current)
	return append([]policy.Action{policy.Apply(deployment(&in.Parent, wanted))}, status...), err
}

// memcachedSpec is `spec`, checked as the CRD's schema and the Rust policy's types read it.
func memcachedSpec(parent *policy.Object) (MemcachedSpec, error) {
	var o struct {
		Spec struct {
			Size          *int `json:"size"`
			ContainerPort *int `json:"containerPort"`
		} `json:"spec"`
	}
	if err := parent.Decode(&o); err != nil {
		return MemcachedSpec{}, policy.Errorf("InvalidSpec", "%s spec: %v", parent.Meta.Name, err)
	}
	if o.Spec.Size == nil {
		return MemcachedSpec{}, policy.Errorf("InvalidSpec", "%s spec: size is missing", parent.Meta.Name)
	}
	s := MemcachedSpec{Size: *o.Spec.Size, ContainerPort: 11211}
	if o.Spec.ContainerPort != nil {
		s.ContainerPort = *o.Spec.ContainerPort
	}
	return s, nil
}

type object = map[string]any

// deployment is the Deployment named after the Memcached: Size replicas of memcached,
// non-root under the restricted profile, its pods labelled so the policy finds them.
func deployment(parent *policy.Object, s MemcachedSpec) object {
	name := parent.Meta.Name
	labels := map[string]string{NameLabel: "memcached", InstanceLabel: name}
	return object{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   object{"name": name, "labels": labels},
		"spec": object{
			"replicas": s.Size,
			"selector": object{"matchLabels": labels},
			"template": object{
				"metadata": object{"labels": labels},
				"spec": object{
					"securityContext": object{"runAsNonRoot": true, "seccompProfile": object{"type": "RuntimeDefault"}},
					"containers": []object{{
						"name":            "memcached",
						"image":           Image,
						"imagePullPolicy": "IfNotPresent",
						// The seed writes `-p=11211 -m=64`; memcached's getopt then reads "=64" as
						// 0 MB, and 1.6 refuses to start. Separate values mean what the seed meant.
						"command": []string{"memcached", "-p", strconv.Itoa(s.ContainerPort), "-m", "64", "-o", "modern", "-v"},
						"ports":   []object{{"containerPort": s.ContainerPort, "name": "memcached"}},
						"securityContext": object{
							"runAsNonRoot":             true,
							"runAsUser":                runAsUser,
							"allowPrivilegeEscalation": false,
							"capabilities":             object{"drop": []string{"ALL"}},
						},
					}},
				},
			},
		},
	}
}

// deploymentStatus holds the fields of the Deployment's status the policy reads.
type deploymentStatus struct {
	ObservedGeneration int64 `json:"observedGeneration"`
	ReadyReplicas      int   `json:"readyReplicas"`
	UpdatedReplicas    int   `json:"updatedReplicas"`
	Replicas           int   `json:"replicas"`
}

func observedStatus(in *policy.Input, s MemcachedSpec, current MemcachedStatus) (MemcachedStatus, error) {
	name, generation, now := in.Parent.Meta.Name, in.Parent.Meta.Generation, in.Now
	found, exists := in.Child(Deployment, name)
	var d struct {
		Status deploymentStatus `json:"status"`
	}
	if exists {
		if err := found.Decode(&d); err != nil {
			return MemcachedStatus{}, err
		}
	}
	ds := d.Status
	nodes := []string{}
	for _, pod := range in.RelatedOf(Pod) {
		var p struct {
			Status struct {
				Phase string `json:"phase"`
			} `json:"status"`
		}
		if err := pod.Decode(&p); err != nil {
			return MemcachedStatus{}, err
		}
		phase := p.Status.Phase
		if phase == "" {
			phase = "Pending"
		}
		if !pod.Meta.Deleting && (phase == "Pending" || phase == "Running") {
			nodes = append(nodes, pod.Meta.Name)
		}
	}
	sort.Strings(nodes)

	// A Deployment its controller has not acted on yet (no observed generation) is still
	// being created (guest-memcached/src/reconcile.rs).
	acted := exists && ds.ObservedGeneration > 0
	available := acted && ds.ReadyReplicas >= s.Size
	// Said without the count of ready pods, as the Deployment's own conditions are: each
	// move of the count was a status write (guest-memcached/src/reconcile.rs).
	// A new Memcached is "Creating" until its Deployment is first ready: that
	// controller's first status changes nothing a user reads
	// (guest-memcached/src/reconcile.rs).
	was, seen := policy.FindCondition(current.Conditions, "Available")
	creating := seen && was.Reason == "Creating"
	reason, message := "Creating", fmt.Sprintf("Creating Deployment %s with %d replicas", name, s.Size)
	switch {
	case available:
		reason, message = "Ready", fmt.Sprintf("Deployment %s is ready at size %d", name, s.Size)
	case acted && !creating:
		reason, message = "Scaling", fmt.Sprintf("Deployment %s is not yet ready at size %d", name, s.Size)
	}
	// Counts the Deployment controller wrote before it saw the Deployment's latest spec
	// are those of the spec before (as `kubectl rollout status` reads them): the rollout
	// is still under way, whatever they say.
	behind := acted && ds.ObservedGeneration < found.Meta.Generation
	progressing := behind || !available || ds.UpdatedReplicas != s.Size || ds.Replicas != s.Size
	// One pair of words from the apply until the rollout is complete: a status write
	// each time they changed (guest-memcached/src/reconcile.rs).
	progressReason, progressMessage := reason, message
	switch {
	case reason == "Creating":
	case progressing:
		progressReason = "Updating"
		progressMessage = fmt.Sprintf("Deployment %s is rolling out at size %d", name, s.Size)
	default:
		progressReason = "Complete"
	}

	conditions := current.Conditions
	conditions = policy.SetCondition(conditions, policy.NewCondition("Available", available, reason, message, now, generation))
	conditions = policy.SetCondition(conditions, policy.NewCondition("Progressing", progressing, progressReason, progressMessage, now, generation))
	// A message even when all is well: `kubectl describe` shows it beside the reason.
	conditions = policy.SetCondition(conditions, policy.NewCondition("Degraded", false, "AsExpected", "No failure observed", now, generation))
	return MemcachedStatus{Conditions: conditions, Nodes: nodes}, nil
}

// finalize is the seed's finalizer flow: say it on the status (`Degraded`, reason
// `Finalizing`), emit an Event, and let the host remove the finalizer. The Deployment
// goes with the Memcached through its owner reference.
func finalize(in *policy.Input, current MemcachedStatus) ([]policy.Action, error) {
	m := in.Parent.Meta
	message := "Performing finalizer operations for the custom resource: " + m.Name
	next := current
	next.Conditions = policy.SetCondition(current.Conditions, policy.NewCondition("Degraded", true, "Finalizing", message, in.Now, m.Generation))
	actions, err := policy.UpdateFrom(next, current)
	return append(actions,
		policy.EmitEvent(policy.Warning, "Deleting", fmt.Sprintf("Custom Resource %s is being deleted from the namespace %s", m.Name, m.Namespace), nil),
		policy.FinalizeDone(),
	), err
}
