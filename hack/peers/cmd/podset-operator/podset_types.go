package main

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Hand-written Go types for our PodSet CRD (manifests/crd/podset-host.yaml, group
// app.example.com/v1alpha1), the tutorial's own types plus what places a pod on a node.
// Typed rather than unstructured, as the tutorial's are: the manager's cache then holds
// what the tutorial's operator holds, so its memory and CPU are the tutorial's too. The
// peer writes only the status subresource, which ignores every field outside status, so
// what these types leave out of the object (the rest of spec.template, spec.policyRef)
// is never lost. Of the status it writes the tutorial's two fields and nothing else: its
// PUT drops status.observedGeneration (the CRD defaults it only on a missing status),
// conditions and policyDigest, which the tutorial does not have.

var (
	// GroupVersion is the PodSet CRD's group and version.
	GroupVersion = schema.GroupVersion{Group: "app.example.com", Version: "v1alpha1"}
	// SchemeBuilder registers PodSet and PodSetList, as kubebuilder's groupversion_info.go does.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&PodSet{}, &PodSetList{})
}

// PodSetSpec is the desired state: the tutorial's replicas, and of our CRD's pod
// template only what the peer copies to its pods.
type PodSetSpec struct {
	Replicas int32      `json:"replicas"`
	Template *Placement `json:"template,omitempty"`
}

// Placement is the part of spec.template the peer reads.
type Placement struct {
	Spec PlacementSpec `json:"spec,omitempty"`
}

// PlacementSpec is where a pod may run: what lands it on the simulated node.
type PlacementSpec struct {
	NodeSelector map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations  []corev1.Toleration `json:"tolerations,omitempty"`
}

// PodSetStatus is the tutorial's status.
type PodSetStatus struct {
	PodNames          []string `json:"podNames"`
	AvailableReplicas int32    `json:"availableReplicas"`
}

// PodSet is the Schema for the podsets API.
type PodSet struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   PodSetSpec   `json:"spec,omitempty"`
	Status PodSetStatus `json:"status,omitempty"`
}

// PodSetList contains a list of PodSet.
type PodSetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PodSet `json:"items"`
}

// The deep copies controller-gen would generate (zz_generated.deepcopy.go): the cache
// hands out copies, so each must share nothing with its original.

// DeepCopyInto copies in into out.
func (in *PodSet) DeepCopyInto(out *PodSet) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Spec.Template != nil {
		t := &Placement{}
		if in.Spec.Template.Spec.NodeSelector != nil {
			t.Spec.NodeSelector = make(map[string]string, len(in.Spec.Template.Spec.NodeSelector))
			for k, v := range in.Spec.Template.Spec.NodeSelector {
				t.Spec.NodeSelector[k] = v
			}
		}
		if in.Spec.Template.Spec.Tolerations != nil {
			t.Spec.Tolerations = make([]corev1.Toleration, len(in.Spec.Template.Spec.Tolerations))
			for i := range in.Spec.Template.Spec.Tolerations {
				in.Spec.Template.Spec.Tolerations[i].DeepCopyInto(&t.Spec.Tolerations[i])
			}
		}
		out.Spec.Template = t
	}
	if in.Status.PodNames != nil {
		out.Status.PodNames = make([]string, len(in.Status.PodNames))
		copy(out.Status.PodNames, in.Status.PodNames)
	}
}

// DeepCopy returns a deep copy.
func (in *PodSet) DeepCopy() *PodSet {
	if in == nil {
		return nil
	}
	out := new(PodSet)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *PodSet) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies in into out.
func (in *PodSetList) DeepCopyInto(out *PodSetList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]PodSet, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *PodSetList) DeepCopy() *PodSetList {
	if in == nil {
		return nil
	}
	out := new(PodSetList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *PodSetList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
