package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
)

const memcachedFinalizer = "cache.example.com/finalizer"

// The sample's condition types.
const (
	typeAvailableMemcached = "Available"
	typeDegradedMemcached  = "Degraded"
)

// The simulated node's label and taint (hack/cluster.sh, node-sim/src/node.rs).
const simulatedNode = "podset.dev/simulated"

// MemcachedReconciler reconciles a Memcached as operator-sdk's Go sample does.
type MemcachedReconciler struct {
	client.Client
	Scheme   *runtime.Scheme
	Recorder record.EventRecorder
	// Image is memcached's image (the sample reads it from $MEMCACHED_IMAGE).
	Image string
	// OnSimulatedNode places the Deployment's pods on podset-node-sim's node (a
	// benchmark runs them there); the sample's pods go wherever the scheduler puts them.
	OnSimulatedNode bool
}

// Reconcile runs the sample's steps. Kept from it on purpose: the first status
// (Available=Unknown) written and the object read again; the finalizer added with Update
// (a PUT of the whole object, which a stale read turns into a 409 and a retry); the
// Deployment created and the reconcile requeued after a minute; its replicas corrected
// with Update; and Available=True written with Status().Update on every reconcile that
// gets that far, changed or not.
func (r *MemcachedReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := log.FromContext(ctx)

	// 1. The Memcached; gone: nothing to do.
	memcached := &Memcached{}
	if err := r.Get(ctx, req.NamespacedName, memcached); err != nil {
		if apierrors.IsNotFound(err) {
			log.Info("memcached resource not found. Ignoring since object must be deleted")
			return ctrl.Result{}, nil
		}
		log.Error(err, "Failed to get memcached")
		return ctrl.Result{}, err
	}

	// 2. No conditions yet: Available=Unknown, then read it again.
	if len(memcached.Status.Conditions) == 0 {
		meta.SetStatusCondition(&memcached.Status.Conditions, metav1.Condition{Type: typeAvailableMemcached,
			Status: metav1.ConditionUnknown, Reason: "Reconciling", Message: "Starting reconciliation"})
		if err := r.Status().Update(ctx, memcached); err != nil {
			log.Error(err, "Failed to update Memcached status")
			return ctrl.Result{}, err
		}
		if err := r.Get(ctx, req.NamespacedName, memcached); err != nil {
			log.Error(err, "Failed to re-fetch memcached")
			return ctrl.Result{}, err
		}
	}

	// 3. The finalizer, added with Update.
	if !controllerutil.ContainsFinalizer(memcached, memcachedFinalizer) {
		log.Info("Adding Finalizer for Memcached")
		if ok := controllerutil.AddFinalizer(memcached, memcachedFinalizer); !ok {
			return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the sample's requeue
		}
		if err := r.Update(ctx, memcached); err != nil {
			log.Error(err, "Failed to update custom resource to add finalizer")
			return ctrl.Result{}, err
		}
	}

	// 4. Being deleted: Degraded=Unknown, the Warning Event, Degraded=True, the
	// finalizer removed.
	if memcached.GetDeletionTimestamp() != nil {
		if controllerutil.ContainsFinalizer(memcached, memcachedFinalizer) {
			return r.finalize(ctx, req, memcached)
		}
		return ctrl.Result{}, nil
	}

	// 5. No Deployment: create it, and look again in a minute.
	found := &appsv1.Deployment{}
	err := r.Get(ctx, types.NamespacedName{Name: memcached.Name, Namespace: memcached.Namespace}, found)
	if err != nil && apierrors.IsNotFound(err) {
		dep, err := r.deploymentForMemcached(memcached)
		if err != nil {
			log.Error(err, "Failed to define new Deployment resource for Memcached")
			meta.SetStatusCondition(&memcached.Status.Conditions, metav1.Condition{Type: typeAvailableMemcached,
				Status: metav1.ConditionFalse, Reason: "Reconciling",
				Message: fmt.Sprintf("Failed to create Deployment for the custom resource (%s): (%s)", memcached.Name, err)})
			if err := r.Status().Update(ctx, memcached); err != nil {
				log.Error(err, "Failed to update Memcached status")
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, err
		}
		log.Info("Creating a new Deployment", "Deployment.Namespace", dep.Namespace, "Deployment.Name", dep.Name)
		if err := r.Create(ctx, dep); err != nil {
			log.Error(err, "Failed to create new Deployment", "Deployment.Namespace", dep.Namespace, "Deployment.Name", dep.Name)
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: time.Minute}, nil
	} else if err != nil {
		log.Error(err, "Failed to get Deployment")
		return ctrl.Result{}, err
	}

	// 6. Its replicas differ from spec.size: Update the Deployment, requeue.
	size := memcached.Spec.Size
	if *found.Spec.Replicas != size {
		found.Spec.Replicas = &size
		if err := r.Update(ctx, found); err != nil {
			log.Error(err, "Failed to update Deployment", "Deployment.Namespace", found.Namespace, "Deployment.Name", found.Name)
			if err := r.Get(ctx, req.NamespacedName, memcached); err != nil {
				log.Error(err, "Failed to re-fetch memcached")
				return ctrl.Result{}, err
			}
			meta.SetStatusCondition(&memcached.Status.Conditions, metav1.Condition{Type: typeAvailableMemcached,
				Status: metav1.ConditionFalse, Reason: "Resizing",
				Message: fmt.Sprintf("Failed to update the size for the custom resource (%s): (%s)", memcached.Name, err)})
			if err := r.Status().Update(ctx, memcached); err != nil {
				log.Error(err, "Failed to update Memcached status")
				return ctrl.Result{}, err
			}
			return ctrl.Result{}, err
		}
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the sample's requeue
	}

	// 7. Available=True, written every time.
	meta.SetStatusCondition(&memcached.Status.Conditions, metav1.Condition{Type: typeAvailableMemcached,
		Status: metav1.ConditionTrue, Reason: "Reconciling",
		Message: fmt.Sprintf("Deployment for custom resource (%s) with %d replicas created successfully", memcached.Name, size)})
	if err := r.Status().Update(ctx, memcached); err != nil {
		log.Error(err, "Failed to update Memcached status")
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// finalize is step 4: the sample's finalizer operations (an Event) between two status
// writes, then the finalizer removed with Update.
func (r *MemcachedReconciler) finalize(ctx context.Context, req ctrl.Request, memcached *Memcached) (ctrl.Result, error) {
	log := log.FromContext(ctx)
	log.Info("Performing Finalizer Operations for Memcached before delete CR")
	meta.SetStatusCondition(&memcached.Status.Conditions, metav1.Condition{Type: typeDegradedMemcached,
		Status: metav1.ConditionUnknown, Reason: "Finalizing",
		Message: fmt.Sprintf("Performing finalizer operations for the custom resource: %s ", memcached.Name)})
	if err := r.Status().Update(ctx, memcached); err != nil {
		log.Error(err, "Failed to update Memcached status")
		return ctrl.Result{}, err
	}

	r.Recorder.Event(memcached, "Warning", "Deleting",
		fmt.Sprintf("Custom Resource %s is being deleted from the namespace %s", memcached.Name, memcached.Namespace))

	if err := r.Get(ctx, req.NamespacedName, memcached); err != nil {
		log.Error(err, "Failed to re-fetch memcached")
		return ctrl.Result{}, err
	}
	meta.SetStatusCondition(&memcached.Status.Conditions, metav1.Condition{Type: typeDegradedMemcached,
		Status: metav1.ConditionTrue, Reason: "Finalizing",
		Message: fmt.Sprintf("Finalizer operations for custom resource %s name were successfully accomplished", memcached.Name)})
	if err := r.Status().Update(ctx, memcached); err != nil {
		log.Error(err, "Failed to update Memcached status")
		return ctrl.Result{}, err
	}

	log.Info("Removing Finalizer for Memcached after successfully perform the operations")
	if ok := controllerutil.RemoveFinalizer(memcached, memcachedFinalizer); !ok {
		return ctrl.Result{Requeue: true}, nil //nolint:staticcheck // the sample's requeue
	}
	if err := r.Update(ctx, memcached); err != nil {
		log.Error(err, "Failed to remove finalizer for Memcached")
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

// deploymentForMemcached is the sample's Deployment: size replicas of memcached, non-root
// with the restricted security context, owned by the Memcached. One change: memcached's
// `-m 64` where the sample writes `-m=64`, which memcached 1.6 reads as 0 MB and refuses
// to start with.
func (r *MemcachedReconciler) deploymentForMemcached(memcached *Memcached) (*appsv1.Deployment, error) {
	ls := labelsForMemcached(memcached.Name, r.Image)
	replicas := memcached.Spec.Size
	spec := corev1.PodSpec{
		SecurityContext: &corev1.PodSecurityContext{
			RunAsNonRoot:   ptr.To(true),
			SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		},
		Containers: []corev1.Container{{
			Image:           r.Image,
			Name:            "memcached",
			ImagePullPolicy: corev1.PullIfNotPresent,
			SecurityContext: &corev1.SecurityContext{
				RunAsNonRoot:             ptr.To(true),
				RunAsUser:                ptr.To[int64](1001),
				AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			},
			Ports:   []corev1.ContainerPort{{ContainerPort: memcached.Spec.ContainerPort, Name: "memcached"}},
			Command: []string{"memcached", "-m", "64", "-o", "modern", "-v"},
		}},
	}
	if r.OnSimulatedNode {
		spec.NodeSelector = map[string]string{simulatedNode: "true"}
		spec.Tolerations = []corev1.Toleration{{Key: simulatedNode, Operator: corev1.TolerationOpEqual,
			Value: "true", Effect: corev1.TaintEffectNoSchedule}}
	}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: memcached.Name, Namespace: memcached.Namespace},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas,
			Selector: &metav1.LabelSelector{MatchLabels: ls},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: ls}, Spec: spec},
		},
	}
	if err := ctrl.SetControllerReference(memcached, dep, r.Scheme); err != nil {
		return nil, err
	}
	return dep, nil
}

// labelsForMemcached are the sample's recommended labels; the version is the image's tag.
func labelsForMemcached(name, image string) map[string]string {
	var tag string
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		tag = image[i+1:]
	}
	return map[string]string{
		"app.kubernetes.io/name":       "Memcached",
		"app.kubernetes.io/instance":   name,
		"app.kubernetes.io/version":    tag,
		"app.kubernetes.io/part-of":    "memcached-operator",
		"app.kubernetes.io/created-by": "controller-manager",
	}
}

// SetupWithManager watches Memcacheds and the Deployments they own.
func (r *MemcachedReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&Memcached{}).
		Owns(&appsv1.Deployment{}).
		Complete(r)
}
