// Package peer starts a controller-runtime manager the way operator-sdk's scaffolded
// main.go does, with the flags a benchmark needs to steer and read it: the namespace to
// watch, where the metrics are served (controller-runtime's registry carries the process
// collector: process_resident_memory_bytes, process_cpu_seconds_total) and the client's
// rate limit.
package peer

import (
	"flag"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// The client-side rate limit controller-runtime gave every manager up to v0.20
// (pkg/client/config: QPS 20, burst 30 when the kubeconfig sets none), which is what the
// tutorials ran with. v0.21 and later disable the limiter unless it is set: these
// defaults keep the tutorials' behaviour, and a negative QPS disables it as v0.25 would.
const (
	tutorialQPS   = 20
	tutorialBurst = 30
)

// Options are the flags every peer takes (and --kubeconfig, which controller-runtime
// registers itself).
type Options struct {
	Namespace   string
	MetricsAddr string
	ProbeAddr   string
	LeaderElect bool
	QPS         float64
	Burst       int
	zap         zap.Options
}

// Flags registers the options on fs, with the scaffold's defaults where it has one.
func Flags(fs *flag.FlagSet) *Options {
	o := &Options{zap: zap.Options{Development: true}}
	fs.StringVar(&o.Namespace, "namespace", os.Getenv("WATCH_NAMESPACE"),
		"The namespace to watch; empty: every namespace (default $WATCH_NAMESPACE, as operator-sdk reads it).")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", "0",
		"The address the metrics endpoint binds to (plain HTTP, e.g. 127.0.0.1:8080); 0 disables it.")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", "0",
		"The address the probe endpoint (/healthz, /readyz) binds to; 0 disables it.")
	fs.BoolVar(&o.LeaderElect, "leader-elect", false,
		"Enable leader election (off for a local run, as in the tutorials).")
	fs.Float64Var(&o.QPS, "kube-api-qps", tutorialQPS,
		"Client-side rate limit of API requests per second (controller-runtime's default up to v0.20); negative disables it.")
	fs.IntVar(&o.Burst, "kube-api-burst", tutorialBurst, "Client-side burst of API requests.")
	o.zap.BindFlags(fs)
	return o
}

// Manager builds the manager: its cache limited to the namespace when one is given.
func (o *Options) Manager(scheme *runtime.Scheme, electionID string) (ctrl.Manager, error) {
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&o.zap)))
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	cfg.QPS = float32(o.QPS)
	cfg.Burst = o.Burst
	opts := ctrl.Options{
		Scheme:                  scheme,
		Metrics:                 metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:  o.ProbeAddr,
		LeaderElection:          o.LeaderElect,
		LeaderElectionID:        electionID,
		LeaderElectionNamespace: o.Namespace,
	}
	if o.Namespace != "" {
		opts.Cache = cache.Options{DefaultNamespaces: map[string]cache.Config{o.Namespace: {}}}
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("starting the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return nil, err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// Run starts the manager until SIGTERM or SIGINT; a failure to set up or run exits 1.
func Run(name string, mgr ctrl.Manager, setupErr error) {
	log := ctrl.Log.WithName("setup")
	if setupErr != nil {
		log.Error(setupErr, "unable to set up", "operator", name)
		os.Exit(1)
	}
	log.Info("starting manager", "operator", name)
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		log.Error(err, "problem running manager", "operator", name)
		os.Exit(1)
	}
}
