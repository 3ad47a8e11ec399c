// Generated from wit/policy.wit by typescript/policy-sdk/generate.mjs: do not edit.
/// <reference path="./podset-policy-types.d.ts" />
declare module 'podset:policy/reconciler@0.4.0' {
  /**
   * One reconcile decision. Must be a pure function of `input` (a fresh instance is
   * used for every call; nothing survives between calls).
   */
  export function decide(input: Input): Array<Action>;
  export type KeyValue = import('podset:policy/types@0.4.0').KeyValue;
  export type GroupVersionKind = import('podset:policy/types@0.4.0').GroupVersionKind;
  export type PolicyError = import('podset:policy/types@0.4.0').PolicyError;
  /**
   * `metadata` as the host reads it.
   */
  export interface ObjectMeta {
    name: string,
    namespace: string,
    uid: string,
    generation: bigint,
    resourceVersion: string,
    labels: Array<KeyValue>,
    annotations: Array<KeyValue>,
    /**
     * `metadata.creationTimestamp`, milliseconds since the Unix epoch.
     */
    createdAt: bigint,
    /**
     * `metadata.deletionTimestamp` is set: the object is being deleted.
     */
    deleting: boolean,
    finalizers: Array<string>,
  }
  /**
   * One object: its kind, its metadata, and everything else (`spec`, `status`,
   * `data`, …) as one JSON object.
   */
  export interface Object {
    kind: GroupVersionKind,
    meta: ObjectMeta,
    body: string,
  }
  /**
   * Names one child of the parent (same namespace).
   */
  export interface ObjectKey {
    kind: GroupVersionKind,
    name: string,
  }
  /**
   * Work the host has issued but not yet seen in its cache (the ReplicaSet
   * controller's expectations, by name). A child in `creations` exists or is about
   * to: never create it again; a child in `deletions` is going away: never count it.
   */
  export interface InFlight {
    creations: Array<ObjectKey>,
    deletions: Array<ObjectKey>,
  }
  /**
   * Which objects a lookup asks for.
   */
  export type LookupMatch = LookupMatchName | LookupMatchLabels;
  /**
   * The object of this name, if there is one.
   */
  export interface LookupMatchName {
    tag: 'name',
    val: string,
  }
  /**
   * Every object carrying all of these labels (an empty list is refused).
   */
  export interface LookupMatchLabels {
    tag: 'labels',
    val: Array<KeyValue>,
  }
  /**
   * Objects a decision reads that it could not declare statically: named in the
   * parent's spec, or in an object looked up before.
   */
  export interface Lookup {
    /**
     * One of `declarations.lookups`; any other kind is refused.
     */
    kind: GroupVersionKind,
    /**
     * "" is the parent's namespace (and the only value for a cluster-scoped kind). A
     * namespaced parent reads only its own namespace; a cluster-scoped parent (served
     * from the administrator's own policy files) names the namespace it reads.
     */
    namespace: string,
    match: LookupMatch,
  }
  /**
   * What the host found for `lookup`, sorted by namespace and name; empty when
   * nothing matched.
   */
  export interface Answer {
    lookup: Lookup,
    objects: Array<Object>,
  }
  /**
   * Everything a policy gets to decide from.
   */
  export interface Input {
    /**
     * The object reconciled; its body holds `spec` and `status`.
     */
    parent: Object,
    /**
     * The objects of the declared child kinds that the parent controls.
     */
    children: Array<Object>,
    /**
     * The objects of the declared related kinds that match their selectors.
     */
    related: Array<Object>,
    /**
     * Answers to the lookups this parent's previous decision named, and to those an
     * earlier call of this reconcile named. An answer nobody named is harmless.
     */
    lookedUp: Array<Answer>,
    inFlight: InFlight,
    /**
     * The host's clock, milliseconds since the Unix epoch. Policies have no clock of their own.
     */
    now: bigint,
  }
  /**
   * # Variants
   * 
   * ## `"normal"`
   * 
   * ## `"warning"`
   */
  export type EventType = 'normal' | 'warning';
  /**
   * A Kubernetes Event on the parent, optionally about one of its children.
   */
  export interface Event {
    type: EventType,
    /**
     * CamelCase, e.g. `Finalizing`.
     */
    reason: string,
    message: string,
    regarding?: ObjectKey,
  }
  /**
   * What the host should do. Children are JSON objects with `apiVersion`, `kind` and
   * `metadata.name` (or `metadata.generateName` for `create`); the host sets the
   * namespace, the controller owner reference and the restricted security context of
   * any pod or pod template, and refuses anything outside the declarations.
   * 
   * Ordered waves: a child annotated `podset.dev/wave: "n"` (0 to 100; absent is 0) is
   * created or applied only once every child of a lower wave is ready; until then the
   * host holds it back (the rest of the decision is performed), sets the parent's
   * condition `WaitingForWave` and sends an Event `WaveWaiting`, and decides again when
   * a child changes. Ready is what the child's annotation `podset.dev/ready-when` says
   * (a JSON list of `{"condition": TYPE}` and `{"field": "/json/pointer", "equals":
   * VALUE}`, all of which must hold), or else what GitOps tools judge (kstatus). The
   * wave is on the child, so a restart never creates out of order.
   */
  export type Action = ActionCreate | ActionApply | ActionDelete | ActionUpdateStatus | ActionEmitEvent | ActionRequeueAfter | ActionFinalizeDone | ActionLookUp;
  /**
   * Create a child.
   */
  export interface ActionCreate {
    tag: 'create',
    val: string,
  }
  /**
   * Create or update a child by server-side apply, with the policy's field manager.
   * An apply whose every field already holds is skipped. An object of a lookup kind
   * declared with `patch`, found by a lookup of this decision, is merge-patched with
   * these fields instead: never created, never owned.
   */
  export interface ActionApply {
    tag: 'apply',
    val: string,
  }
  /**
   * Delete a child (with its UID as a precondition).
   */
  export interface ActionDelete {
    tag: 'delete',
    val: ObjectKey,
  }
  /**
   * Replace the parent's `status` with this JSON object; skipped when equal.
   */
  export interface ActionUpdateStatus {
    tag: 'update-status',
    val: string,
  }
  /**
   * Publish an Event (rate-limited per parent).
   */
  export interface ActionEmitEvent {
    tag: 'emit-event',
    val: Event,
  }
  /**
   * Reconcile again after this many milliseconds even if nothing changes.
   */
  export interface ActionRequeueAfter {
    tag: 'requeue-after',
    val: number,
  }
  /**
   * The parent is being deleted and the policy's cleanup is done: remove the finalizer.
   */
  export interface ActionFinalizeDone {
    tag: 'finalize-done',
  }
  /**
   * This decision read the answer to this lookup. Name every lookup read, on every
   * call. When one has no answer in `input.looked-up`, the host performs none of
   * this call's other actions: it answers from its caches and calls `decide` again
   * (at most 5 calls a reconcile; then `PolicyFailed`, reason `LookupsUnstable`).
   * The host remembers the lookups of the last decision and answers them before the
   * next one, so a policy whose lookups do not change is called once. A change to a
   * looked-up object re-triggers exactly the parents whose last decision named it.
   */
  export interface ActionLookUp {
    tag: 'look-up',
    val: Lookup,
  }
}
