// Generated from wit/policy.wit by typescript/policy-sdk/generate.mjs: do not edit.
/// <reference path="./podset-policy-types.d.ts" />
declare module 'podset:policy/podset@0.4.0' {
  /**
   * One reconcile decision. Must be a pure function of `input` (a fresh instance is
   * used for every call; nothing survives between calls).
   */
  export function decide(input: Input): Array<Action>;
  export type KeyValue = import('podset:policy/types@0.4.0').KeyValue;
  export type Condition = import('podset:policy/types@0.4.0').Condition;
  export type PolicyError = import('podset:policy/types@0.4.0').PolicyError;
  /**
   * A Pod's `status.phase`.
   * # Variants
   * 
   * ## `"pending"`
   * 
   * ## `"running"`
   * 
   * ## `"succeeded"`
   * 
   * ## `"failed"`
   * 
   * ## `"unknown"`
   */
  export type PodPhase = 'pending' | 'running' | 'succeeded' | 'failed' | 'unknown';
  /**
   * The part of `PodSet.status` a policy owns.
   */
  export interface PodsetStatus {
    /**
     * Names of the active pods, sorted.
     */
    podNames: Array<string>,
    /**
     * Active pods whose Ready condition is True.
     */
    availableReplicas: number,
    /**
     * The `metadata.generation` this status reflects.
     */
    observedGeneration: bigint,
    /**
     * Conditions owned by the policy. Host-owned conditions (`PolicyFailed`) are
     * neither shown to the policy nor replaced by it.
     */
    conditions: Array<Condition>,
  }
  /**
   * The PodSet being reconciled.
   */
  export interface Podset {
    name: string,
    namespace: string,
    uid: string,
    generation: bigint,
    labels: Array<KeyValue>,
    /**
     * `spec.replicas`.
     */
    replicas: number,
    /**
     * The current status (policy-owned part).
     */
    status: PodsetStatus,
  }
  /**
   * A pod controlled by the PodSet (owner reference with its UID, `controller: true`):
   * what a PodSet decision reads, and nothing more. Every string here is copied into
   * the policy's memory on every call (a call into the policy for each one), so 0.3.0
   * keeps one string per pod, its name: it dropped `uid` and `labels`, which no
   * decision read (the host acts on pods by name and checks their owner itself), and
   * sends whether the pod is scheduled instead of its node's name. A policy that needs
   * a child's whole object uses the `reconcile-policy` world.
   */
  export interface Pod {
    name: string,
    phase: PodPhase,
    /**
     * The pod's Ready condition is True.
     */
    ready: boolean,
    /**
     * `metadata.deletionTimestamp` is set: the pod is terminating.
     */
    deleting: boolean,
    /**
     * `spec.nodeName` is set: the pod is bound to a node. (0.2.0 sent the node's
     * name, a string copied in for every pod, which no decision read.)
     */
    scheduled: boolean,
    /**
     * `metadata.creationTimestamp`, milliseconds since the Unix epoch.
     */
    createdAt: bigint,
    /**
     * Sum of the containers' restart counts.
     */
    restartCount: number,
  }
  /**
   * Work the host has issued but not yet seen in its cache (ReplicaSet-style
   * expectations). A policy must count these, or a stale cache makes it act twice.
   */
  export interface InFlight {
    /**
     * Pod creations issued and not yet observed.
     */
    creations: number,
    /**
     * Names of pods whose deletion was issued and not yet observed.
     */
    deletions: Array<string>,
  }
  /**
   * Everything a PodSet policy gets to decide from.
   */
  export interface Input {
    podset: Podset,
    pods: Array<Pod>,
    inFlight: InFlight,
    /**
     * The host's clock, milliseconds since the Unix epoch. Policies have no clock of their own.
     */
    now: bigint,
  }
  /**
   * How a created pod is named.
   */
  export type PodName = PodNameExact | PodNamePrefix;
  /**
   * Exactly this name (a DNS-1123 subdomain).
   */
  export interface PodNameExact {
    tag: 'exact',
    val: string,
  }
  /**
   * `metadata.generateName`: the API server appends a random suffix.
   */
  export interface PodNamePrefix {
    tag: 'prefix',
    val: string,
  }
  /**
   * Create one pod from the PodSet's template. The host adds the owner reference,
   * the selector labels and the restricted security context.
   */
  export interface CreatePod {
    name: PodName,
    /**
     * Labels added to the template's labels (selector labels always win).
     */
    labels: Array<KeyValue>,
    /**
     * Annotations added to the template's annotations.
     */
    annotations: Array<KeyValue>,
  }
  /**
   * What the host should do.
   */
  export type Action = ActionCreatePod | ActionDeletePod | ActionUpdateStatus | ActionRequeueAfter;
  export interface ActionCreatePod {
    tag: 'create-pod',
    val: CreatePod,
  }
  /**
   * Delete the named pod. The host refuses pods the PodSet does not control.
   */
  export interface ActionDeletePod {
    tag: 'delete-pod',
    val: string,
  }
  /**
   * Replace the policy-owned status. Asked for in a decision that also creates
   * pods, it is folded into the next decision's: that one follows as soon as the
   * pods are observed, and its status names them.
   */
  export interface ActionUpdateStatus {
    tag: 'update-status',
    val: PodsetStatus,
  }
  /**
   * Reconcile again after this many milliseconds even if nothing changes.
   */
  export interface ActionRequeueAfter {
    tag: 'requeue-after',
    val: number,
  }
}
