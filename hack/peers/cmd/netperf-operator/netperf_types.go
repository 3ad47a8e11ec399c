package main

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

// Hand-written Go types for our Netperf CRD (manifests/crd/netperf.yaml,
// app.example.com/v1alpha1): the seed's spec (serverNode, clientNode) with our CRD's
// duration, and the status fields the seed writes (status, serverPod, clientPod,
// speedBitsPerSec) with our CRD's message. The CRD's conditions and policyDigest are
// written by the Netperf policy, no part of the seed; Status().Update sends the whole
// status, so a peer's write drops them, which nothing of the peer's reads.

var (
	// GroupVersion is the Netperf CRD's group and version.
	GroupVersion = schema.GroupVersion{Group: "app.example.com", Version: "v1alpha1"}
	// SchemeBuilder registers Netperf and NetperfList.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func init() {
	SchemeBuilder.Register(&Netperf{}, &NetperfList{})
}

// The phases, as the seed names them.
const (
	phaseInitial = "Initial"
	phaseServer  = "Server"
	phaseTest    = "Test"
	phaseDone    = "Done"
	phaseError   = "Error"
)

// NetperfSpec is the desired test.
type NetperfSpec struct {
	// ServerNode pins the server pod to a node (by its hostname label); empty: anywhere.
	ServerNode string `json:"serverNode,omitempty"`
	// ClientNode pins the client pod likewise.
	ClientNode string `json:"clientNode,omitempty"`
	// Duration is how long the client sends, in seconds.
	Duration int32 `json:"duration,omitempty"`
}

// NetperfStatus is where the test is, and its result.
type NetperfStatus struct {
	Status          string `json:"status,omitempty"`
	ServerPod       string `json:"serverPod,omitempty"`
	ClientPod       string `json:"clientPod,omitempty"`
	SpeedBitsPerSec int64  `json:"speedBitsPerSec,omitempty"`
	Message         string `json:"message,omitempty"`
}

// Netperf is the Schema for the netperfs API.
type Netperf struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   NetperfSpec   `json:"spec,omitempty"`
	Status NetperfStatus `json:"status,omitempty"`
}

// NetperfList contains a list of Netperf.
type NetperfList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Netperf `json:"items"`
}

// The deep copies controller-gen would generate (spec and status hold values only).

// DeepCopyInto copies in into out.
func (in *Netperf) DeepCopyInto(out *Netperf) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ObjectMeta.DeepCopyInto(&out.ObjectMeta)
}

// DeepCopy returns a deep copy.
func (in *Netperf) DeepCopy() *Netperf {
	if in == nil {
		return nil
	}
	out := new(Netperf)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *Netperf) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}

// DeepCopyInto copies in into out.
func (in *NetperfList) DeepCopyInto(out *NetperfList) {
	*out = *in
	out.TypeMeta = in.TypeMeta
	in.ListMeta.DeepCopyInto(&out.ListMeta)
	if in.Items != nil {
		out.Items = make([]Netperf, len(in.Items))
		for i := range in.Items {
			in.Items[i].DeepCopyInto(&out.Items[i])
		}
	}
}

// DeepCopy returns a deep copy.
func (in *NetperfList) DeepCopy() *NetperfList {
	if in == nil {
		return nil
	}
	out := new(NetperfList)
	in.DeepCopyInto(out)
	return out
}

// DeepCopyObject implements runtime.Object.
func (in *NetperfList) DeepCopyObject() runtime.Object {
	if c := in.DeepCopy(); c != nil {
		return c
	}
	return nil
}
