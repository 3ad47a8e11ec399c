// Command podset-operator is the operator-sdk PodSet tutorial's operator, run against
// podset-host's PodSet CRD (app.example.com/v1alpha1) as a benchmark peer: what a user
// would otherwise write by hand with controller-runtime. See podset_controller.go for
// what it keeps from the tutorial and the two things it adds.
//
//	podset-operator --kubeconfig=PATH [--namespace=NS] [--metrics-bind-address=ADDR]
//	                [--kube-api-qps=20 --kube-api-burst=30] [--image=busybox]
package main

import (
	"flag"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"podset.dev/hack/peers/internal/peer"
)

func main() {
	opts := peer.Flags(flag.CommandLine)
	image := flag.String("image", "busybox", "The image of the pods (the tutorial's).")
	flag.Parse()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(AddToScheme(scheme))

	mgr, err := opts.Manager(scheme, "podset-operator.app.example.com")
	if err == nil {
		err = (&PodSetReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme(), Image: *image}).SetupWithManager(mgr)
	}
	peer.Run("podset-operator", mgr, err)
}
