package policy

import (
	"reflect"
	"sort"
)

// Lookup names objects a decision reads that it could not declare statically: named in
// the parent's spec, or in an object looked up before. Exactly one of Name and Labels
// is set.
type Lookup struct {
	// Kind is one of the declared lookup kinds; any other is refused.
	Kind Kind
	// Namespace "" is the parent's (and the only value for a cluster-scoped kind).
	Namespace string
	// Name asks for the object of this name, if there is one.
	Name string
	// Labels asks for every object carrying all of these labels, sorted by key.
	Labels []Label
}

// Label is one label of a lookup by labels.
type Label struct {
	Key   string
	Value string
}

// Answer is what the host found for Lookup, sorted by namespace and name; empty when
// nothing matched.
type Answer struct {
	Lookup  Lookup
	Objects []Object
}

// Lookups reads the answers the host put in the input, and remembers what was asked:
// a decision names every lookup it reads, on every call, with the actions of Finish.
// A lookup with no answer yet reads as "nothing found": the host performs none of such
// a call's other actions, answers, and calls again.
type Lookups struct {
	in         *Input
	asked      []Lookup
	unanswered int
}

// NewLookups reads the answers of in.
func NewLookups(in *Input) *Lookups { return &Lookups{in: in} }

// Named returns the object of kind k named name in namespace ("" for the parent's), if
// there is one.
func (l *Lookups) Named(k Kind, name, namespace string) (*Object, bool) {
	found := l.ask(Lookup{Kind: k, Namespace: namespace, Name: name})
	if len(found) == 0 {
		return nil, false
	}
	return &found[0], true
}

// Labelled returns the objects of kind k in the parent's namespace carrying every one
// of labels.
func (l *Lookups) Labelled(k Kind, labels map[string]string) []Object {
	list := make([]Label, 0, len(labels))
	for key, value := range labels {
		list = append(list, Label{Key: key, Value: value})
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Key < list[j].Key })
	return l.ask(Lookup{Kind: k, Labels: list})
}

// Answered tells whether every lookup asked so far has its answer in the input.
func (l *Lookups) Answered() bool { return l.unanswered == 0 }

// Finish returns the ActLookUp actions naming every lookup read.
func (l *Lookups) Finish() []Action {
	out := make([]Action, 0, len(l.asked))
	for _, asked := range l.asked {
		out = append(out, Action{Type: ActLookUp, Lookup: asked})
	}
	return out
}

func (l *Lookups) ask(lookup Lookup) []Object {
	l.asked = append(l.asked, lookup)
	for _, a := range l.in.LookedUp {
		if sameLookup(a.Lookup, lookup) {
			return a.Objects
		}
	}
	l.unanswered++
	return nil
}

func sameLookup(a, b Lookup) bool {
	return a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name &&
		len(a.Labels) == len(b.Labels) && (len(a.Labels) == 0 || reflect.DeepEqual(a.Labels, b.Labels))
}
