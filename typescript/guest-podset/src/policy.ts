// The default PodSet policy in TypeScript, on the contract's typed PodSet world: it keeps
// `spec.replicas` active pods (Pending or Running, not terminating), scales down in
// ReplicaSet order, and reports status only when it changed. It decides what
// guest-podset/ (Rust) decides, on the same scenario files.

import { type Logger, PolicyError } from '@podset/policy-sdk';
import {
  type Action,
  type Condition,
  type Input,
  type Pod,
  type PodPhase,
  type PodSetPolicy,
  type PodSetStatus,
  createPod,
  deletePod,
  requeueAfter,
  updateStatus,
} from '@podset/policy-sdk/podset';

/**
 * The most pods created in one decision. The rest follow on the next reconcile, so one
 * PodSet scaling up cannot flood the API server (the ReplicaSet controller's burst cap
 * plays the same role).
 */
export const MAX_CREATES_PER_PASS = 100;
/** Asked for when creations were capped, as a safety net: the host also reconciles again once it sees the pods. */
export const REQUEUE_AFTER_CAP_MS = 1_000;
/** The condition reporting whether `spec.replicas` pods are ready. */
export const AVAILABLE = 'Available';

/** Pending or Running and not terminating: the pods that count towards `spec.replicas`. */
function isActive(pod: Pod): boolean {
  return (pod.phase === 'pending' || pod.phase === 'running') && !pod.deleting;
}

export function decide(input: Input, log: Logger): Action[] {
  const { podset } = input;
  if (podset.replicas < 0) {
    throw new PolicyError('InvalidReplicas', `spec.replicas is ${podset.replicas}, must not be negative`);
  }
  // A deletion the host issued but has not yet observed still shows an active pod in its
  // cache. That pod is going away: neither count it nor pick it again.
  const deleting = new Set(input.inFlight.deletions);
  let staying = input.pods.filter((p) => isActive(p) && !deleting.has(p.name));
  const expected = staying.length + input.inFlight.creations;

  const actions: Action[] = [];
  if (expected < podset.replicas) {
    const missing = podset.replicas - expected;
    const now = Math.min(missing, MAX_CREATES_PER_PASS);
    for (let i = 0; i < now; i++) actions.push(createPod({ generateName: `${podset.name}-` }));
    if (missing > now) actions.push(requeueAfter(REQUEUE_AFTER_CAP_MS));
  } else if (expected > podset.replicas) {
    // In-flight creations cannot be deleted; only observed pods can go.
    const surplus = Math.min(expected - podset.replicas, staying.length);
    staying = [...staying].sort(deletionOrder);
    for (const p of staying.slice(0, surplus)) actions.push(deletePod(p.name));
    staying = staying.slice(surplus);
  }

  // The status names the pods that stay: not those this decision deletes, nor those whose
  // deletion is in flight (guest-podset/src/decide.rs says why).
  const status = changedStatus(input, staying);
  if (status) actions.push(updateStatus(status));
  if (actions.length > 0) log.debug(`${podset.namespace}/${podset.name}: ${actions.length} action(s)`);
  return actions;
}

/** The status that describes the pods that stay, unless the current one does. */
function changedStatus(input: Input, staying: Pod[]): PodSetStatus | undefined {
  const names = staying.map((p) => p.name).sort(compare);
  const ready = staying.filter((p) => p.ready).length;
  const { replicas, generation, status: current } = input.podset;
  const enough = ready >= replicas;
  const condition: Condition = {
    type: AVAILABLE,
    status: enough ? 'true' : 'false',
    reason: enough ? 'MinimumReplicasAvailable' : 'MinimumReplicasUnavailable',
    message: `${ready} of ${replicas} pods ready`,
  };
  const same =
    current.podNames.length === names.length &&
    current.podNames.every((n, i) => n === names[i]) &&
    current.availableReplicas === ready &&
    current.observedGeneration === generation &&
    current.conditions.length === 1 &&
    sameCondition(current.conditions[0], condition);
  return same ? undefined : { podNames: names, availableReplicas: ready, observedGeneration: generation, conditions: [condition] };
}

function sameCondition(a: Condition | undefined, b: Condition): boolean {
  return a !== undefined && a.type === b.type && a.status === b.status && a.reason === b.reason && a.message === b.message;
}

/** By UTF-16 code units, as the Rust policy's byte order for the ASCII names Kubernetes allows. */
function compare(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

const PHASE_RANK: Record<PodPhase, number> = { pending: 0, unknown: 1, running: 2, succeeded: 3, failed: 3 };

/**
 * The ReplicaSet controller's scale-down order: the pod that is cheapest to lose first.
 * Unscheduled before scheduled, Pending before Unknown before Running, not ready before
 * ready, more restarts before fewer, newer before older; the name breaks ties so the
 * decision is deterministic.
 */
export function deletionOrder(a: Pod, b: Pod): number {
  return (
    Number(a.scheduled) - Number(b.scheduled) ||
    PHASE_RANK[a.phase] - PHASE_RANK[b.phase] ||
    Number(a.ready) - Number(b.ready) ||
    b.restartCount - a.restartCount ||
    b.createdAt - a.createdAt ||
    compare(a.name, b.name)
  );
}

export const policy: PodSetPolicy = { name: 'guest-podset-ts', version: '0.1.0', decide };
