package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Hand-written Go types for our Memcached CRD (manifests/crd/memcached.yaml,
// cache.example.com/v1alpha1): the sample's own types, which cover the CRD's whole spec
// (size, containerPort). Typed rather than unstructured, as the sample's are, so the
// cache holds what the sample holds. The sample writes the whole object with Update (its
// finalizer): a spec field these types lacked would be dropped by that PUT, and there is
// none. Of the status it writes its conditions; the CRD's status.nodes (written by the
// Memcached policy) is no part of the sample.

var (
	// GroupVersion is the Memcached CRD's group and version.
	GroupVersion = schema.GroupVersion{Group: "cache.example.com", Version: "v1alpha1"}
	// SchemeBuilder registers Memcached and MemcachedList.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Memcached{}, &MemcachedList{})
}

// MemcachedSpec is the desired state.
type MemcachedSpec struct {
	// Size is the number of memcached pods.
	Size int32 `json:"size,omitempty"`
	// ContainerPort is memcached's port.
	ContainerPort int32 `json:"containerPort,omitempty"`
}

// MemcachedStatus is the observed state.
type MemcachedStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Memcached is the Schema for the memcacheds API.
type Memcached struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   MemcachedSpec   `json:"spec,omitempty"`
	Status MemcachedStatus `json:"status,omitempty"`
}

// MemcachedList contains a list of Memcached.
type MemcachedList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Memcached `json:"items"`
}

// The deep copies controller-gen would generate: the cache hands out copies, so each
// must share nothing with its original.

// DeepCopyInto copies in into out.
func (in *Memcached) DeepCopyInto(out *Memcached) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
	if in.Status.Conditions != nil {
		out.Status.Conditions = make([]metav1.Condition, len(in.Status.Conditions))
		for i := range in.Status.Conditions {
			in.Status.Conditions[i].DeepCopyInto(&out.Status.Conditions[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *Memcached) DeepCopy() *Memcached {
	if in == nil {
		return nil
	}
	out := new(Memcached)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Memcached) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies in into out.
func (in *MemcachedList) DeepCopyInto(out *MemcachedList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Memcached, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *MemcachedList) DeepCopy() *MemcachedList {
	if in == nil {
		return nil
	}
	out := new(MemcachedList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *MemcachedList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
