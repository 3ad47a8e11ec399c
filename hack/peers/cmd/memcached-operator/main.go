// Command memcached-operator is operator-sdk's Go sample (the Memcached operator of its
// tutorial), run against podset-host's Memcached CRD (cache.example.com/v1alpha1) as a
// benchmark peer. See memcached_controller.go for what it keeps from the sample and the
// one fix it makes.
//
//	memcached-operator --kubeconfig=PATH [--namespace=NS] [--metrics-bind-address=ADDR]
//	                   [--kube-api-qps=20 --kube-api-burst=30] [--image=IMAGE] [--simulated-node]
package main

import (
	"flag"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"podset.dev/hack/peers/internal/peer"
)

// The image podset-host's Memcached policy runs (guest-memcached/src/reconcile.rs), which
// the embedded cluster's node has.
const defaultImage = "memcached:1.6.18"

func main() {
	opts := peer.Flags(flag.CommandLine)
	image := defaultImage
	if env, ok := os.LookupEnv("MEMCACHED_IMAGE"); ok {
		image = env
	}
	flag.StringVar(&image, "image", image, "memcached's image (default $MEMCACHED_IMAGE, as the sample reads it, else the policy's).")
	simulated := flag.Bool("simulated-node", false,
		"Place the pods on podset-node-sim's node (its label and a toleration of its taint): the bench runs them there.")
	flag.Parse()

	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(AddToScheme(scheme))

	mgr, err := opts.Manager(scheme, "memcached-operator.cache.example.com")
	if err == nil {
		err = (&MemcachedReconciler{
			Client:          mgr.GetClient(),
			Scheme:          mgr.GetScheme(),
			Recorder:        mgr.GetEventRecorderFor("memcached-controller"), //nolint:staticcheck // the sample's core/v1 Events
			Image:           image,
			OnSimulatedNode: *simulated,
		}).SetupWithManager(mgr)
	}
	peer.Run("memcached-operator", mgr, err)
}
