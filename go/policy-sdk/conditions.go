package policy

import (
	"sort"
	"time"
)

// Condition is `metav1.Condition`, as the Kubernetes API conventions want it in a status.
type Condition struct {
	Type string `json:"type"`
	// Status is `True`, `False` or `Unknown`.
	Status string `json:"status"`
	// Reason is CamelCase, for the last transition.
	Reason  string `json:"reason"`
	Message string `json:"message"`
	// LastTransitionTime is when the status last changed (RFC 3339).
	LastTransitionTime string `json:"lastTransitionTime"`
	// ObservedGeneration is the `metadata.generation` the condition was set for (0: none).
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// NewCondition is a condition of type t as of now, for generation (0: none).
func NewCondition(t string, status bool, reason, message string, now time.Time, generation int64) Condition {
	s := "False"
	if status {
		s = "True"
	}
	return Condition{
		Type:               t,
		Status:             s,
		Reason:             reason,
		Message:            message,
		LastTransitionTime: now.UTC().Format(time.RFC3339),
		ObservedGeneration: generation,
	}
}

// SetCondition returns conditions with next in place of any condition of its type,
// keeping the old LastTransitionTime when the status did not change (else every
// reconcile would rewrite the status), sorted by type.
func SetCondition(conditions []Condition, next Condition) []Condition {
	out := make([]Condition, 0, len(conditions)+1)
	for _, c := range conditions {
		if c.Type != next.Type {
			out = append(out, c)
		} else if c.Status == next.Status {
			next.LastTransitionTime = c.LastTransitionTime
		}
	}
	out = append(out, next)
	sort.Slice(out, func(i, j int) bool { return out[i].Type < out[j].Type })
	return out
}

// FindCondition returns the condition of type t, if there is one.
func FindCondition(conditions []Condition, t string) (Condition, bool) {
	for _, c := range conditions {
		if c.Type == t {
			return c, true
		}
	}
	return Condition{}, false
}

// IsTrue tells whether conditions hold a condition of type t with status True.
func IsTrue(conditions []Condition, t string) bool {
	c, ok := FindCondition(conditions, t)
	return ok && c.Status == "True"
}
