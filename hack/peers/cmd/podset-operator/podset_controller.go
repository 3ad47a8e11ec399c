package main

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

// The uid the pods run busybox as: busybox's image runs as root, which a kubelet refuses
// under runAsNonRoot; the same uid as podset-host's default template.
const podUID int64 = 1000

// PodSetReconciler reconciles a PodSet as the operator-sdk tutorial's does.
type PodSetReconciler struct {
	client.Client
	Scheme *runtime.Scheme
	// Image is the pods' image (the tutorial's "busybox").
	Image string
}

// Reconcile moves the PodSet's pods one step towards spec.replicas. Kept from the
// tutorial on purpose, as they are what a user of it runs: one pod created per
// reconcile, then a requeue (R pods take at least R reconciles, and a reconcile that
// runs before the cache has seen the pod it just created creates another, deleted again
// by the scale-down step); Pending pods count as available; the status is written with
// Status().Update, a PUT of the cached object, when it differs.
func (r *PodSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := log.FromContext(ctx)

	// 1. The PodSet; gone: its pods go by garbage collection.
	podSet := &PodSet{}
	if err := r.Get(ctx, req.NamespacedName, podSet); err != nil {
		if apierrors.IsNotFound(err) {
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}

	// 2. Its pods, by the tutorial's labels, from the manager's cache.
	pods := &corev1.PodList{}
	if err := r.List(ctx, pods, client.InNamespace(podSet.Namespace), client.MatchingLabels(podLabels(podSet))); err != nil {
		return ctrl.Result{}, err
	}

	// 3. Available: not terminating, and Running or Pending.
	var available []corev1.Pod
	for _, pod := range pods.Items {
		if pod.DeletionTimestamp != nil {
			continue
		}
		if pod.Status.Phase == corev1.PodRunning || pod.Status.Phase == corev1.PodPending {
			available = append(available, pod)
		}
	}
	numAvailable := int32(len(available))
	names := []string{}
	for _, pod := range available {
		names = append(names, pod.Name)
	}

	// 4. The status, when it differs.
	status := PodSetStatus{PodNames: names, AvailableReplicas: numAvailable}
	if !reflect.DeepEqual(podSet.Status, status) {
		podSet.Status = status
		if err := r.Status().Update(ctx, podSet); err != nil {
			log.Error(err, "Failed to update PodSet status")
			return ctrl.Result{}, err
		}
	}

	// 5. Too many: delete the first ones.
	if numAvailable > podSet.Spec.Replicas {
		log.Info("Scaling down pods", "Currently available", numAvailable, "Required replicas", podSet.Spec.Replicas)
		for i := range available[:numAvailable-podSet.Spec.Replicas] {
			if err := r.Delete(ctx, &available[i]); err != nil {
				log.Error(err, "Failed to delete pod", "pod.name", available[i].Name)
				return ctrl.Result{}, err
			}
		}
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the tutorial's requeue
	}

	// 6. Too few: create one.
	if numAvailable < podSet.Spec.Replicas {
		log.Info("Scaling up pods", "Currently available", numAvailable, "Required replicas", podSet.Spec.Replicas)
		pod := r.newPodForCR(podSet)
		if err := controllerutil.SetControllerReference(podSet, pod, r.Scheme); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.Create(ctx, pod); err != nil {
			log.Error(err, "Failed to create pod", "pod.name", pod.Name)
			return ctrl.Result{}, err
		}
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the tutorial's requeue
	}

	return ctrl.Result{}, nil
}

func podLabels(cr *PodSet) map[string]string {
	return map[string]string{"app": cr.Name, "version": "v0.1"}
}

// newPodForCR is the tutorial's pod (busybox, sleep 3600), with the template's node
// selector and tolerations (so it lands on the simulated node when the PodSet asks) and
// a non-root uid: the only changes to it.
func (r *PodSetReconciler) newPodForCR(cr *PodSet) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			GenerateName: cr.Name + "-pod",
			Namespace:    cr.Namespace,
			Labels:       podLabels(cr),
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name:    "busybox",
				Image:   r.Image,
				Command: []string{"sleep", "3600"},
			}},
			SecurityContext: &corev1.PodSecurityContext{RunAsUser: ptr.To(podUID)},
		},
	}
	if t := cr.Spec.Template; t != nil {
		pod.Spec.NodeSelector = t.Spec.NodeSelector
		pod.Spec.Tolerations = t.Spec.Tolerations
	}
	return pod
}

// SetupWithManager watches PodSets and the pods they own (an informer over every pod of
// the watched namespaces), without predicates: the tutorial's base version.
func (r *PodSetReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&PodSet{}).
		Owns(&corev1.Pod{}).
		Complete(r)
}
