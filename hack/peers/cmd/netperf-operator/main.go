// Command netperf-operator is the seed's Netperf operator (a pod-to-pod TCP throughput
// test between a server pod and a client pod) written with controller-runtime, run
// against podset-host's Netperf CRD (app.example.com/v1alpha1) as a benchmark peer. See
// netperf_controller.go for what it keeps from the seed and what it changes.
//
//	netperf-operator --kubeconfig=PATH [--namespace=NS] [--metrics-bind-address=ADDR]
//	                 [--kube-api-qps=20 --kube-api-burst=30] [--image=IMAGE] [--simulated-node]
package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"podset.dev/hack/peers/internal/peer"
)

// The image podset-host's Netperf policy runs (guest-netperf/src/reconcile.rs), built
// for the embedded cluster's node by hack/images.sh.
const defaultImage = "iperf3:3.12"

func main() {
	opts := peer.Flags(flag.CommandLine)
	image := flag.String("image", defaultImage, "The image of the server and client pods (iperf3, as the policy's).")
	simulated := flag.Bool("simulated-node", false,
		"Let the pods land on podset-node-sim's node (a toleration of its taint): the bench runs them there.")
	flag.Parse()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(AddToScheme(scheme))

	mgr, err := opts.Manager(scheme, "netperf-operator.app.example.com")
	if err == nil {
		err = (&NetperfReconciler{
			Client:          mgr.GetClient(),
			Scheme:          mgr.GetScheme(),
			Image:           *image,
			OnSimulatedNode: *simulated,
		}).SetupWithManager(mgr)
	}
	peer.Run("netperf-operator", mgr, err)
}
