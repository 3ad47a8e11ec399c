// {{Kind}}: a reconcile policy for podset-host.
//
// A `{{Kind}}` owns a ConfigMap holding `spec.data`; its status says whether the
// ConfigMap holds it. Change Decide to do what your operator does: it is a plain
// function from what the host observed to what it should do.
package main

import (
	"fmt"

	policy "podset.dev/policy-sdk"
)

// {{Kind}} is the kind of the objects this policy reconciles (the CRD: crd.yaml).
var {{Kind}} = policy.Kind{Group: "{{group}}", Version: "v1alpha1", Kind: "{{Kind}}"}

// ConfigMap is the kind of the object each one owns.
var ConfigMap = policy.Kind{Group: "", Version: "v1", Kind: "ConfigMap"}

var Policy = policy.Policy{
	Name:     "{{crate}}-go",
	Version:  "0.1.0",
	Declares: policy.Declarations{Parent: {{Kind}}, Children: []policy.Kind{ConfigMap}},
	Decide:   Decide,
}

// {{Kind}}Spec is what a {{Kind}} asks for (the CRD: crd.yaml).
type {{Kind}}Spec struct {
	// Data is what the owned ConfigMap holds.
	Data map[string]string `json:"data"`
}

// {{Kind}}Status is what the policy observed.
type {{Kind}}Status struct {
	// Conditions: `Ready`, the ConfigMap holds `spec.data`.
	Conditions []policy.Condition `json:"conditions,omitempty"`
}

func Decide(in *policy.Input, log policy.Logger) ([]policy.Action, error) {
	var parent struct {
		Spec   {{Kind}}Spec   `json:"spec"`
		Status {{Kind}}Status `json:"status"`
	}
	if err := in.Parent.Decode(&parent); err != nil {
		return nil, err
	}
	data := parent.Spec.Data
	if data == nil {
		data = map[string]string{}
	}
	name := fmt.Sprintf("%s-data", in.Parent.Meta.Name)
	// Re-stated every time: the host drops an apply whose fields all hold already.
	actions := []policy.Action{policy.Apply(map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]string{"name": name}, "data": data,
	})}
	ready := false
	if held, ok := in.Child(ConfigMap, name); ok {
		var cm struct {
			Data map[string]string `json:"data"`
		}
		if err := held.Decode(&cm); err != nil {
			return nil, err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		ready, _ = policy.SameJSON(cm.Data, data)
	}
	reason, message := "Syncing", "writing the ConfigMap"
	if ready {
		reason, message = "Synced", "the ConfigMap holds spec.data"
	}
	next := {{Kind}}Status{Conditions: policy.SetCondition(parent.Status.Conditions,
		policy.NewCondition("Ready", ready, reason, message, in.Now, in.Parent.Meta.Generation))}
	status, err := policy.UpdateFrom(next, parent.Status)
	return append(actions, status...), err
}
