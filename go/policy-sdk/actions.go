package policy

import (
	"encoding/json"
	"reflect"
	"strconv"
	"time"
)

// ActionType says what an Action asks of the host.
type ActionType int

const (
	// ActCreate creates a child (Object: `apiVersion`, `kind`, `metadata.name` or
	// `metadata.generateName`).
	ActCreate ActionType = iota
	// ActApply creates or updates a child by server-side apply (or merge-patches an
	// object of a lookup kind declared with Patch).
	ActApply
	// ActDelete deletes the child Key (with its UID as a precondition).
	ActDelete
	// ActUpdateStatus replaces the parent's `status` with Object; skipped when equal.
	ActUpdateStatus
	// ActEmitEvent publishes Event on the parent.
	ActEmitEvent
	// ActRequeueAfter reconciles again After this long even if nothing changes.
	ActRequeueAfter
	// ActFinalizeDone removes the parent's finalizer: its cleanup is done.
	ActFinalizeDone
	// ActLookUp names a lookup the decision read (see Lookups).
	ActLookUp
)

// Action is what the host should do. Build one with the functions of this package.
type Action struct {
	Type ActionType
	// Object is marshalled to JSON: the child (ActCreate, ActApply) or the status
	// (ActUpdateStatus).
	Object any
	Key    ObjectKey
	Event  Event
	After  time.Duration
	Lookup Lookup
}

// EventType is an Event's `type`.
type EventType int

const (
	Normal EventType = iota
	Warning
)

// Event is a Kubernetes Event on the parent, optionally about one of its children.
type Event struct {
	Type EventType
	// Reason is CamelCase, e.g. `Finalizing`.
	Reason    string
	Message   string
	Regarding *ObjectKey
}

// Apply creates or updates child by server-side apply (`apiVersion`, `kind`,
// `metadata.name`).
func Apply(child any) Action { return Action{Type: ActApply, Object: child} }

// Create creates child (`metadata.name` or `metadata.generateName`).
func Create(child any) Action { return Action{Type: ActCreate, Object: child} }

// Delete deletes the child of kind k named name (with its UID as a precondition).
func Delete(k Kind, name string) Action { return Action{Type: ActDelete, Key: k.Key(name)} }

// UpdateStatus replaces the parent's `status`; the host skips it when equal.
func UpdateStatus(status any) Action { return Action{Type: ActUpdateStatus, Object: status} }

// EmitEvent publishes an Event on the parent (rate-limited per parent), about one of
// its children when regarding is not nil.
func EmitEvent(t EventType, reason, message string, regarding *ObjectKey) Action {
	return Action{Type: ActEmitEvent, Event: Event{Type: t, Reason: reason, Message: message, Regarding: regarding}}
}

// RequeueAfter reconciles again after d even if nothing changes (in milliseconds).
func RequeueAfter(d time.Duration) Action { return Action{Type: ActRequeueAfter, After: d} }

// FinalizeDone says the parent being deleted is cleaned up: the host removes the finalizer.
func FinalizeDone() Action { return Action{Type: ActFinalizeDone} }

// Wave is the annotation that puts a child in a wave: the host creates or applies a
// child of wave n only once every child of a lower wave is ready. Absent: wave 0.
const Wave = "podset.dev/wave"

// ReadyWhen is the annotation with the rules that say a child is ready (a JSON list of
// `{"condition": TYPE}` and `{"field": "/json/pointer", "equals": VALUE}`).
const ReadyWhen = "podset.dev/ready-when"

// InWave returns annotations with the child's wave set to n.
func InWave(annotations map[string]string, n int) map[string]string {
	out := make(map[string]string, len(annotations)+1)
	for k, v := range annotations {
		out[k] = v
	}
	out[Wave] = strconv.Itoa(n)
	return out
}

// UpdateFrom is UpdateStatus(next) when next differs from current as JSON, else
// nothing: a converged parent gets no actions, so no write and no hot loop.
func UpdateFrom(next, current any) ([]Action, error) {
	same, err := SameJSON(next, current)
	if err != nil || same {
		return nil, err
	}
	return []Action{UpdateStatus(next)}, nil
}

// SameJSON tells whether a and b marshal to the same JSON value (object keys in any
// order).
func SameJSON(a, b any) (bool, error) {
	va, err := asJSON(a)
	if err != nil {
		return false, err
	}
	vb, err := asJSON(b)
	if err != nil {
		return false, err
	}
	return reflect.DeepEqual(va, vb), nil
}

func asJSON(v any) (any, error) {
	text, err := json.Marshal(v)
	if err != nil {
		return nil, Errorf("InvalidObject", "cannot encode %T as JSON: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(text, &out); err != nil {
		return nil, Errorf("InvalidObject", "cannot read back %T as JSON: %v", v, err)
	}
	return out, nil
}
