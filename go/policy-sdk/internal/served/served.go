// Package served holds the policy a component serves and converts between the
// contract's generated types (internal/wit) and the SDK's.
package served

import (
	"encoding/json"
	"math"
	"sort"
	"time"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
	policy "podset.dev/policy-sdk"
	"podset.dev/policy-sdk/internal/decision"
	wit "podset.dev/policy-sdk/internal/wit/podset_policy_reconciler"
	types "podset.dev/policy-sdk/internal/wit/podset_policy_types"
)

// Policy is what the component serves (set by component.Serve, in an init function:
// before the host's first call, and inside the build's snapshot).
var Policy *policy.Policy

// Log is the host's `log`.
var Log func(policy.Level, string)

// Info is the policy's identity.
func Info() types.PolicyInfo {
	p := served()
	d := p.Declares
	info := types.PolicyInfo{
		Name:     p.Name,
		Version:  p.Version,
		Contract: policy.Contract,
		Declares: types.Declarations{
			Parent:    gvk(d.Parent),
			Children:  mapped(d.Children, gvk),
			Related:   mapped(d.Related, relatedKind),
			Finalizer: witTypes.None[string](),
			Lookups:   mapped(d.Lookups, func(l policy.LookupKind) types.LookupKind { return types.LookupKind{Kind: gvk(l.Kind), Patch: l.Patch} }),
		},
	}
	if d.Finalizer != "" {
		info.Declares.Finalizer = witTypes.Some(d.Finalizer)
	}
	return info
}

// Decide is one decision of the served policy: an error it returns, or a panic, is the
// decision's policy-error.
func Decide(in wit.Input) witTypes.Result[[]wit.Action, types.PolicyError] {
	out, failure := decision.Run(func() ([]policy.Action, error) {
		input := fromWit(in)
		return served().Decide(&input, policy.NewLogger(Log))
	}, toWit)
	if failure != nil {
		return witTypes.Err[[]wit.Action](types.PolicyError{Reason: failure.Reason, Message: failure.Message})
	}
	return witTypes.Ok[[]wit.Action, types.PolicyError](out)
}

// WarmUp runs the policy once on an input with nothing but an empty parent of its kind,
// and encodes what it returns, all discarded: encoding/json builds its encoder and
// decoder for a type the first time it meets it, which in a fresh instance is every
// decision (0.9 ms of the scaffold's 1 ms, measured 2026-11-27). Run in an init
// function, that work is in the build's snapshot, and every instance starts with it done.
// A policy is a pure function, so running it here changes nothing else.
func WarmUp() {
	defer func() { _ = recover() }()
	p := served()
	in := policy.Input{Parent: policy.Object{Kind: p.Declares.Parent, Meta: policy.Meta{Name: "warm-up"}, Body: []byte("{}")}}
	actions, _ := p.Decide(&in, policy.NewLogger(nil))
	_, _ = toWit(actions)
}

func served() *policy.Policy {
	if Policy == nil {
		panic("no policy served: call component.Serve(policy) in an init function of the main package")
	}
	return Policy
}

func mapped[T, U any](in []T, f func(T) U) []U {
	out := make([]U, 0, len(in))
	for _, v := range in {
		out = append(out, f(v))
	}
	return out
}

func gvk(k policy.Kind) types.GroupVersionKind {
	return types.GroupVersionKind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func kind(k types.GroupVersionKind) policy.Kind {
	return policy.Kind{Group: k.Group, Version: k.Version, Kind: k.Kind}
}

func relatedKind(r policy.RelatedKind) types.RelatedKind {
	return types.RelatedKind{Kind: gvk(r.Kind), Selector: mapped(r.Selector, func(l policy.LabelRequirement) types.LabelRequirement {
		value := types.MakeSelectorValueExact(l.Exact)
		switch {
		case l.ParentName:
			value = types.MakeSelectorValueParentName()
		case l.ParentLabel != "":
			value = types.MakeSelectorValueParentLabel(l.ParentLabel)
		}
		return types.LabelRequirement{Key: l.Key, Value: value}
	})}
}

func labels(kvs []types.KeyValue) map[string]string {
	out := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		out[kv.Key] = kv.Value
	}
	return out
}

func object(o wit.Object) policy.Object {
	m := o.Meta
	return policy.Object{
		Kind: kind(o.Kind),
		Meta: policy.Meta{
			Name:            m.Name,
			Namespace:       m.Namespace,
			UID:             m.Uid,
			Generation:      m.Generation,
			ResourceVersion: m.ResourceVersion,
			Labels:          labels(m.Labels),
			Annotations:     labels(m.Annotations),
			CreatedAt:       time.UnixMilli(m.CreatedAt).UTC(),
			Deleting:        m.Deleting,
			Finalizers:      m.Finalizers,
		},
		Body: json.RawMessage(o.Body),
	}
}

func objectKey(k wit.ObjectKey) policy.ObjectKey {
	return policy.ObjectKey{Kind: kind(k.Kind), Name: k.Name}
}

func lookupFromWit(l wit.Lookup) policy.Lookup {
	out := policy.Lookup{Kind: kind(l.Kind), Namespace: l.Namespace}
	if l.Match.Tag() == wit.LookupMatchName {
		out.Name = l.Match.Name()
	} else {
		out.Labels = mapped(l.Match.Labels(), func(kv types.KeyValue) policy.Label { return policy.Label{Key: kv.Key, Value: kv.Value} })
	}
	return out
}

func fromWit(in wit.Input) policy.Input {
	return policy.Input{
		Parent:   object(in.Parent),
		Children: mapped(in.Children, object),
		Related:  mapped(in.Related, object),
		LookedUp: mapped(in.LookedUp, func(a wit.Answer) policy.Answer {
			return policy.Answer{Lookup: lookupFromWit(a.Lookup), Objects: mapped(a.Objects, object)}
		}),
		InFlight: policy.InFlight{Creations: mapped(in.InFlight.Creations, objectKey), Deletions: mapped(in.InFlight.Deletions, objectKey)},
		Now:      time.UnixMilli(in.Now).UTC(),
	}
}

func witKey(k policy.ObjectKey) wit.ObjectKey {
	return wit.ObjectKey{Kind: gvk(k.Kind), Name: k.Name}
}

func toWit(actions []policy.Action) ([]wit.Action, error) {
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

func encode(v any) (string, error) {
	text, err := json.Marshal(v)
	if err != nil {
		return "", policy.Errorf("InvalidAction", "cannot encode %T as JSON: %v", v, err)
	}
	return string(text), nil
}

func action(a policy.Action) (wit.Action, error) {
	switch a.Type {
	case policy.ActCreate, policy.ActApply, policy.ActUpdateStatus:
		text, err := encode(a.Object)
		if err != nil {
			return wit.Action{}, err
		}
		switch a.Type {
		case policy.ActCreate:
			return wit.MakeActionCreate(text), nil
		case policy.ActApply:
			return wit.MakeActionApply(text), nil
		default:
			return wit.MakeActionUpdateStatus(text), nil
		}
	case policy.ActDelete:
		return wit.MakeActionDelete(witKey(a.Key)), nil
	case policy.ActEmitEvent:
		e := wit.Event{Type: wit.EventTypeNormal, Reason: a.Event.Reason, Message: a.Event.Message, Regarding: witTypes.None[wit.ObjectKey]()}
		if a.Event.Type == policy.Warning {
			e.Type = wit.EventTypeWarning
		}
		if a.Event.Regarding != nil {
			e.Regarding = witTypes.Some(witKey(*a.Event.Regarding))
		}
		return wit.MakeActionEmitEvent(e), nil
	case policy.ActRequeueAfter:
		millis := a.After.Milliseconds()
		if millis < 0 || millis > math.MaxUint32 {
			return wit.Action{}, policy.Errorf("InvalidAction", "requeue after %v: out of range (0 to %d ms)", a.After, uint32(math.MaxUint32))
		}
		return wit.MakeActionRequeueAfter(uint32(millis)), nil
	case policy.ActFinalizeDone:
		return wit.MakeActionFinalizeDone(), nil
	case policy.ActLookUp:
		l := wit.Lookup{Kind: gvk(a.Lookup.Kind), Namespace: a.Lookup.Namespace}
		if len(a.Lookup.Labels) > 0 {
			kvs := mapped(a.Lookup.Labels, func(l policy.Label) types.KeyValue { return types.KeyValue{Key: l.Key, Value: l.Value} })
			sort.SliceStable(kvs, func(i, j int) bool { return kvs[i].Key < kvs[j].Key })
			l.Match = wit.MakeLookupMatchLabels(kvs)
		} else {
			l.Match = wit.MakeLookupMatchName(a.Lookup.Name)
		}
		return wit.MakeActionLookUp(l), nil
	}
	return wit.Action{}, policy.Errorf("InvalidAction", "unknown action type %d", a.Type)
}
