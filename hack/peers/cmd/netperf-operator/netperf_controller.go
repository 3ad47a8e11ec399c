package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The simulated node's label and taint (hack/cluster.sh, node-sim/src/node.rs).
const simulatedNode = "podset.dev/simulated"

// iperf3's port, as the policy's.
const port = 5201

// NetperfReconciler runs a Netperf's test as the seed's operator does.
type NetperfReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Image is the pods' image (iperf3).
	Image string
	// OnSimulatedNode lets the pods land on podset-node-sim's node (a benchmark pins
	// them there with spec.serverNode and spec.clientNode).
	OnSimulatedNode bool
}

// Reconcile takes the seed's steps, one per phase: Initial creates the server pod and
// records it (Server); once the server pod runs, the client pod is created against its
// IP (Test); once the client pod has succeeded, its report is read, both pods are
// deleted and the speed recorded (Done). Kept from the seed: the pods' fixed names (the
// Netperf's UID's last group), its labels, node pinning by affinity, restart policies
// (the server Always, the client OnFailure), an existing pod taken as created, and the
// status written after the pods are deleted. Changed, each because the seed's way cannot
// run here: the pods run iperf3 (the image podset-host's policy runs; the seed's netperf
// image is not in Debian) and the report is read from the client's termination message,
// not its log; the server carries a TCP startup probe and the client waits until it is
// Ready (iperf3 with --logfile exits 0 on a refused connection, so the seed's wait for
// Running alone fails a test that races the server's start); a failure is recorded as
// Error with a message (the seed's updateNetperfStatus wrote Done whatever it was given);
// and the status goes through the status subresource our CRD has.
func (r *NetperfReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	netperf := &Netperf{}
	if err := r.Get(ctx, req.NamespacedName, netperf); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Its pods go with it, by garbage collection.
	if !netperf.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	switch netperf.Status.Status {
	case "", phaseInitial:
		return ctrl.Result{}, r.startServer(ctx, netperf)
	case phaseServer:
		return ctrl.Result{}, r.startClient(ctx, netperf)
	case phaseTest:
		return ctrl.Result{}, r.collect(ctx, netperf)
	}
	return ctrl.Result{}, nil
}

// startServer creates the server pod (one already there counts) and records it.
func (r *NetperfReconciler) startServer(ctx context.Context, netperf *Netperf) error {
	pod, err := r.pod(netperf, "server", corev1.RestartPolicyAlways, netperf.Spec.ServerNode, []string{"iperf3", "-s", "-p", strconv.Itoa(port)})
	if err != nil {
		return err
	}
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: port, Name: "iperf3"}}
	pod.Spec.Containers[0].StartupProbe = &corev1.Probe{
		ProbeHandler:     corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(port)}},
		PeriodSeconds:    1,
		FailureThreshold: 60,
	}
	return r.createAndRecord(ctx, netperf, pod, phaseServer, &netperf.Status.ServerPod)
}

// startClient creates the client pod once the server serves, and records it.
func (r *NetperfReconciler) startClient(ctx context.Context, netperf *Netperf) error {
	server := &corev1.Pod{}
	key := types.NamespacedName{Namespace: netperf.Namespace, Name: netperf.Status.ServerPod}
	if err := r.Get(ctx, key, server); err != nil {
		if apierrors.IsNotFound(err) {
			// Not in the cache yet (or deleted): the seed created it again.
			return r.startServer(ctx, netperf)
		}
		return err
	}
	if server.Status.Phase != corev1.PodRunning || !ready(server) || server.Status.PodIP == "" {
		return nil // its next change brings the next reconcile
	}
	command := []string{"iperf3", "-c", server.Status.PodIP, "-p", strconv.Itoa(port),
		"-t", strconv.Itoa(int(max(netperf.Spec.Duration, 1))), "-i", "0", "-J", "--logfile", "/dev/termination-log"}
	pod, err := r.pod(netperf, "client", corev1.RestartPolicyOnFailure, netperf.Spec.ClientNode, command)
	if err != nil {
		return err
	}
	pod.Spec.Containers[0].TerminationMessagePath = "/dev/termination-log"
	pod.Spec.Containers[0].TerminationMessagePolicy = corev1.TerminationMessageFallbackToLogsOnError
	return r.createAndRecord(ctx, netperf, pod, phaseTest, &netperf.Status.ClientPod)
}

// createAndRecord creates one of the test's pods (one already there counts: the seed's
// way of not creating it twice) and records it: the next phase, and the pod's name in
// field (status.serverPod or status.clientPod).
func (r *NetperfReconciler) createAndRecord(ctx context.Context, netperf *Netperf, pod *corev1.Pod, phase string, field *string) error {
	if err := r.Create(ctx, pod); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating pod %s: %w", pod.Name, err)
	}
	log.FromContext(ctx).Info("pod created", "pod", pod.Name, "phase", phase)
	netperf.Status.Status = phase
	*field = pod.Name
	return r.Status().Update(ctx, netperf)
}

// collect reads the client's report once it has succeeded, deletes both pods and
// records the speed; a client that failed, or a report without a speed, ends in Error.
func (r *NetperfReconciler) collect(ctx context.Context, netperf *Netperf) error {
	pod := &corev1.Pod{}
	key := types.NamespacedName{Namespace: netperf.Namespace, Name: netperf.Status.ClientPod}
	if err := r.Get(ctx, key, pod); err != nil {
		return client.IgnoreNotFound(err)
	}
	var speed int64
	var failure error
	switch pod.Status.Phase {
	case corev1.PodSucceeded:
		speed, failure = bitsPerSecond(terminationMessage(pod))
	case corev1.PodFailed:
		failure = fmt.Errorf("the client pod %s failed", pod.Name)
	default:
		return nil
	}
	for _, name := range []string{netperf.Status.ClientPod, netperf.Status.ServerPod} {
		gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: netperf.Namespace, Name: name}}
		if err := r.Delete(ctx, gone); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting pod %s: %w", name, err)
		}
	}
	if failure != nil {
		netperf.Status.Status = phaseError
		netperf.Status.Message = failure.Error()
	} else {
		netperf.Status.Status = phaseDone
		netperf.Status.SpeedBitsPerSec = speed
	}
	log.FromContext(ctx).Info("test finished", "phase", netperf.Status.Status, "speed", speed)
	return r.Status().Update(ctx, netperf)
}

// pod is one of the test's pods: the seed's name and labels, owned by the Netperf,
// pinned to node when one is given.
func (r *NetperfReconciler) pod(netperf *Netperf, kind string, restart corev1.RestartPolicy, node string, command []string) (*corev1.Pod, error) {
	uid := strings.Split(string(netperf.UID), "-")
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:      "netperf-" + kind + "-" + uid[len(uid)-1],
			Namespace: netperf.Namespace,
			Labels:    map[string]string{"app": "netperf-operator", "netperf-type": kind},
		},
		Spec: corev1.PodSpec{
			RestartPolicy: restart,
			Containers: []corev1.Container{{
				Name:            "iperf3",
				Image:           r.Image,
				ImagePullPolicy: corev1.PullIfNotPresent,
				Command:         command,
			}},
		},
	}
	if node != "" {
		pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{{
					Key: "kubernetes.io/hostname", Operator: corev1.NodeSelectorOpIn, Values: []string{node},
				}}}},
			},
		}}
	}
	if r.OnSimulatedNode {
		pod.Spec.Tolerations = []corev1.Toleration{{Key: simulatedNode, Operator: corev1.TolerationOpEqual,
			Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	if err := ctrl.SetControllerReference(netperf, pod, r.Scheme); err != nil {
		return nil, err
	}
	return pod, nil
}

func ready(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

func terminationMessage(pod *corev1.Pod) string {
	for _, c := range pod.Status.ContainerStatuses {
		if t := c.State.Terminated; t != nil {
			return t.Message
		}
	}
	return ""
}

// bitsPerSecond is the receiver's throughput in an iperf3 JSON report.
func bitsPerSecond(report string) (int64, error) {
	var r struct {
		Error string `json:"error"`
		End   struct {
			SumReceived *struct {
				BitsPerSecond float64 `json:"bits_per_second"`
			} `json:"sum_received"`
		} `json:"end"`
	}
	if err := json.Unmarshal([]byte(report), &r); err != nil {
		return 0, fmt.Errorf("the client's report is not iperf3 JSON: %w", err)
	}
	if r.Error != "" {
		return 0, fmt.Errorf("iperf3 failed: %s", r.Error)
	}
	if r.End.SumReceived == nil {
		return 0, fmt.Errorf("the client's report has no end.sum_received.bits_per_second")
	}
	return int64(r.End.SumReceived.BitsPerSecond), nil
}

// SetupWithManager watches Netperfs and the pods they own.
func (r *NetperfReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&Netperf{}).
		Owns(&corev1.Pod{}).
		Complete(r)
}
