// Generated from wit/policy.wit by typescript/policy-sdk/generate.mjs: do not edit.
declare module 'podset:policy/types@0.4.0' {
  /**
   * A Kubernetes label or annotation.
   */
  export interface KeyValue {
    key: string,
    value: string,
  }
  /**
   * A condition's `status`.
   * # Variants
   * 
   * ## `"true"`
   * 
   * ## `"false"`
   * 
   * ## `"unknown"`
   */
  export type ConditionStatus = 'true' | 'false' | 'unknown';
  /**
   * A status condition as a PodSet policy sees it. The host keeps
   * `lastTransitionTime`: it is set when `status` changes and preserved otherwise.
   */
  export interface Condition {
    type: string,
    status: ConditionStatus,
    reason: string,
    message: string,
  }
  /**
   * A policy that cannot decide says why. The host reports it as a `PolicyFailed`
   * condition, a Warning Event and a metric, touches nothing, and retries with backoff.
   */
  export interface PolicyError {
    /**
     * A CamelCase reason, as in Kubernetes conditions.
     */
    reason: string,
    message: string,
  }
  /**
   * A Kubernetes kind. The core group is "": `v1 Pod` is {group: "", version: "v1", kind: "Pod"}.
   */
  export interface GroupVersionKind {
    group: string,
    version: string,
    kind: string,
  }
  /**
   * Where the value of a label requirement comes from.
   */
  export type SelectorValue = SelectorValueExact | SelectorValueParentName | SelectorValueParentLabel;
  /**
   * This literal value.
   */
  export interface SelectorValueExact {
    tag: 'exact',
    val: string,
  }
  /**
   * The parent's `metadata.name`.
   */
  export interface SelectorValueParentName {
    tag: 'parent-name',
  }
  /**
   * The value of the parent's label with this key (no match when the parent lacks it).
   */
  export interface SelectorValueParentLabel {
    tag: 'parent-label',
    val: string,
  }
  /**
   * `key` equals a value derived from the parent.
   */
  export interface LabelRequirement {
    key: string,
    value: SelectorValue,
  }
  /**
   * Objects a policy reads but does not own, e.g. the pods of the Deployment it owns:
   * of `kind`, in the parent's namespace, carrying every label in `selector`. An
   * empty selector selects nothing.
   */
  export interface RelatedKind {
    kind: GroupVersionKind,
    selector: Array<LabelRequirement>,
  }
  /**
   * A kind a policy may look up by name or by a label selector it computes
   * (`reconciler.look-up`). The host watches the kind, checks at load that its own
   * identity may get, list and watch it, and refuses a lookup of any other kind.
   * Declaring `v1 Secret` is what lets Secrets' contents reach a policy.
   */
  export interface LookupKind {
    kind: GroupVersionKind,
    /**
     * The policy may also change looked-up objects of this kind: a merge patch of the
     * fields it sets, under its own field manager, with no owner reference. It never
     * creates or deletes them, and a patch carries no pod spec (the host's restricted
     * profile applies to what it creates, not to what others own).
     */
    patch: boolean,
  }
  /**
   * What a policy reconciles. The host watches exactly these kinds, checks at load
   * that its own identity may act on them, and refuses any action outside them.
   */
  export interface Declarations {
    /**
     * The kind of the objects reconciled: namespaced, or cluster-scoped (served from
     * the operator's own policy files; its children may be cluster-scoped or in
     * namespaces the operator's administrator granted, docs/reference/enforced.md).
     */
    parent: GroupVersionKind,
    /**
     * Kinds of the objects a parent owns: created, applied and deleted by the policy,
     * each carrying the parent as its controller owner.
     */
    children: Array<GroupVersionKind>,
    /**
     * Kinds read through label selectors, never written.
     */
    related: Array<RelatedKind>,
    /**
     * A finalizer the host adds to every parent. A parent being deleted is reconciled
     * until its policy returns `finalize-done`; then the host removes the finalizer. The
     * operator's administrator bounds the wait (`--finalizer-timeout`): past it the host
     * removes the finalizer itself, so that deletion never depends on the policy.
     */
    finalizer?: string,
    /**
     * Kinds the policy may look up (`reconcile-policy` only; a PodSet policy declares none).
     */
    lookups: Array<LookupKind>,
  }
  /**
   * Who the policy is and what it reconciles.
   */
  export interface PolicyInfo {
    name: string,
    version: string,
    /**
     * The version of this package the policy was built against, e.g. "0.4.0".
     */
    contract: string,
    declares: Declarations,
  }
}
