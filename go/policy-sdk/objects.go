package policy

import (
	"encoding/json"
	"time"
)

// Kind is a Kubernetes kind. The core group is "": a Pod is Kind{"", "v1", "Pod"}.
type Kind struct {
	Group   string
	Version string
	Kind    string
}

// APIVersion is `apps/v1`, or `v1` for the core group.
func (k Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// Key names the child of this kind called name.
func (k Kind) Key(name string) ObjectKey {
	return ObjectKey{Kind: k, Name: name}
}

// ObjectKey names one child of the parent (in the parent's namespace).
type ObjectKey struct {
	Kind Kind
	Name string
}

// Meta is `metadata` as the host reads it.
type Meta struct {
	Name            string
	Namespace       string
	UID             string
	Generation      int64
	ResourceVersion string
	Labels          map[string]string
	Annotations     map[string]string
	// CreatedAt is `metadata.creationTimestamp`.
	CreatedAt time.Time
	// Deleting is true once `metadata.deletionTimestamp` is set.
	Deleting   bool
	Finalizers []string
}

// Object is one object: its kind, its metadata, and everything else (`spec`, `status`,
// `data`, …) as one JSON object.
type Object struct {
	Kind Kind
	Meta Meta
	Body json.RawMessage
}

// Decode reads the body into v, a struct with the fields the policy reads (`Spec`,
// `Status`, …, tagged as in the API). A body that does not fit is the InvalidObject
// policy error.
func (o *Object) Decode(v any) error {
	if err := json.Unmarshal(o.Body, v); err != nil {
		return Errorf("InvalidObject", "%s %s: %v", o.Kind.Kind, o.Meta.Name, err)
	}
	return nil
}

// InFlight is the work the host issued and has not yet seen in its cache (the
// ReplicaSet controller's expectations, by name). A child in Creations exists or is
// about to: never create it again; a child in Deletions is going away: never count it.
type InFlight struct {
	Creations []ObjectKey
	Deletions []ObjectKey
}

// Input is everything a decision gets to decide from.
type Input struct {
	// Parent is the object reconciled; its body holds `spec` and `status`.
	Parent Object
	// Children are the objects of the declared child kinds that the parent controls.
	Children []Object
	// Related are the objects of the declared related kinds that match their selectors.
	Related []Object
	// LookedUp are the host's answers to the lookups named before (see Lookups).
	LookedUp []Answer
	InFlight InFlight
	// Now is the host's clock. A policy has no clock of its own.
	Now time.Time
}

// ChildrenOf returns the children of kind k the parent controls.
func (in *Input) ChildrenOf(k Kind) []Object {
	return ofKind(in.Children, k)
}

// Child returns the child of kind k named name, if the parent controls one.
func (in *Input) Child(k Kind, name string) (*Object, bool) {
	for i := range in.Children {
		if in.Children[i].Kind == k && in.Children[i].Meta.Name == name {
			return &in.Children[i], true
		}
	}
	return nil, false
}

// RelatedOf returns the related objects of kind k that matched the policy's selector.
func (in *Input) RelatedOf(k Kind) []Object {
	return ofKind(in.Related, k)
}

// Creating tells whether the host created this child and has not seen it yet: never
// create it again.
func (in *Input) Creating(k Kind, name string) bool {
	return contains(in.InFlight.Creations, k.Key(name))
}

// Deleting tells whether the host deleted this child and has not seen it go yet: never
// count it.
func (in *Input) Deleting(k Kind, name string) bool {
	return contains(in.InFlight.Deletions, k.Key(name))
}

func ofKind(objects []Object, k Kind) []Object {
	var out []Object
	for _, o := range objects {
		if o.Kind == k {
			out = append(out, o)
		}
	}
	return out
}

func contains(keys []ObjectKey, key ObjectKey) bool {
	for _, k := range keys {
		if k == key {
			return true
		}
	}
	return false
}
