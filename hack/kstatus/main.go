// Command kstatus prints the status GitOps tools compute for Kubernetes objects
// (sigs.k8s.io/cli-utils/pkg/kstatus/status.Compute, what Flux and kpt use): one JSON
// line per object read from stdin (a single object or a List, as `kubectl get -o json`
// prints them), with its kind, name, status and message. The cluster tests use it to
// check what podset-host's parents report (host/tests/cluster/kstatus.rs).
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

type verdict struct {
	Kind    string `json:"kind"`
	Name    string `json:"name"`
	Status  string `json:"status"`
	Message string `json:"message"`
}

func main() {
	if err := run(os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
		os.Exit(1)
	}
}

func run(in io.Reader, out io.Writer) error {
	body, err := io.ReadAll(in)
	if err != nil {
		return fmt.Errorf("reading stdin: %w", err)
	}
	var obj unstructured.Unstructured
	if err := obj.UnmarshalJSON(body); err != nil {
		return fmt.Errorf("not a Kubernetes object or List: %w", err)
	}
	objects := []unstructured.Unstructured{obj}
	if obj.IsList() {
		list, err := obj.ToList()
		if err != nil {
			return fmt.Errorf("reading the List: %w", err)
		}
		objects = list.Items
	}
	enc := json.NewEncoder(out)
	for i := range objects {
		o := &objects[i]
		res, err := status.Compute(o)
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		v := verdict{Kind: o.GetKind(), Name: o.GetName(), Status: res.Status.String(), Message: res.Message}
		if err := enc.Encode(v); err != nil {
			return err
		}
	}
	return nil
}
