/// <reference path="./generated/podset-policy.d.ts" />
// The contract's typed PodSet world (`podset-policy`): a policy over PodSets
// (`app.example.com/v1alpha1`) that reads typed pods and returns typed actions, with no
// JSON on either side. It is the fast path for that one kind; a policy over any other
// kind, or one that needs a child's whole object, uses the `reconcile-policy` world
// (`@podset/policy-sdk`). A PodSet policy is
//
//   export const policy: PodSetPolicy = { name, version, decide(input, log) { … } };
//
// and its component's entry file: `export const { identity, podset } = servePodSet(policy, log);`.

import type * as witTypes from 'podset:policy/types@0.4.0';
import type * as wit from 'podset:policy/podset@0.4.0';
import { PolicyError } from './errors.ts';
import { Kind, type KeyValue } from './objects.ts';
import { decision, identityOf, type Level, type Logger, logger } from './serve.ts';

export type { KeyValue };

/** The parent kind of every policy of this world, and its children's. */
export const PODSET = new Kind('app.example.com', 'v1alpha1', 'PodSet');
export const POD = new Kind('', 'v1', 'Pod');

/** A status condition as a PodSet policy sees it; the host keeps `lastTransitionTime`. */
export type Condition = witTypes.Condition;
export type ConditionStatus = witTypes.ConditionStatus;
export type PodPhase = wit.PodPhase;
export type InFlight = wit.InFlight;
export type CreatePod = wit.CreatePod;

/** A pod the PodSet controls, with `createdAt` in milliseconds since the Unix epoch. */
export type Pod = Omit<wit.Pod, 'createdAt'> & { createdAt: number };

/** The part of `PodSet.status` a policy owns. */
export type PodSetStatus = Omit<wit.PodsetStatus, 'observedGeneration'> & { observedGeneration: number };

/** The PodSet being reconciled. */
export type PodSet = Omit<wit.Podset, 'generation' | 'status'> & { generation: number; status: PodSetStatus };

/** Everything a PodSet policy gets to decide from, its 64-bit integers as numbers. */
export type Input = Omit<wit.Input, 'podset' | 'pods' | 'now'> & {
  podset: PodSet;
  pods: Pod[];
  /** The host's clock, milliseconds since the Unix epoch. Policies have no clock of their own. */
  now: number;
};

/** What the host should do. */
export type Action =
  | { tag: 'create-pod'; val: CreatePod }
  | { tag: 'delete-pod'; val: string }
  | { tag: 'update-status'; val: PodSetStatus }
  | { tag: 'requeue-after'; val: number };

/** A PodSet policy: who it is and its decision. Its declarations are the world's. */
export interface PodSetPolicy {
  name: string;
  version: string;
  /** One decision: a pure function of `input`. Throw a `PolicyError` when it cannot decide. */
  decide(input: Input, log: Logger): Action[];
}

function keyValues(m: Record<string, string> | undefined): KeyValue[] {
  return Object.keys(m ?? {})
    .sort()
    .map((key) => ({ key, value: (m ?? {})[key] ?? '' }));
}

/**
 * Create one pod from the PodSet's template, named `name`, or `generateName` followed by
 * a suffix the API server picks (exactly one of the two). The host adds the owner
 * reference, the selector labels and the restricted security context; `labels` and
 * `annotations` are added to the template's (selector labels always win).
 */
export function createPod(pod: {
  name?: string;
  generateName?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}): Action {
  if ((pod.name === undefined) === (pod.generateName === undefined)) {
    throw new PolicyError('InvalidAction', 'a pod to create needs exactly one of name and generateName');
  }
  const name: wit.PodName =
    pod.name !== undefined ? { tag: 'exact', val: pod.name } : { tag: 'prefix', val: pod.generateName ?? '' };
  return { tag: 'create-pod', val: { name, labels: keyValues(pod.labels), annotations: keyValues(pod.annotations) } };
}

/** Delete the named pod. The host refuses pods the PodSet does not control. */
export function deletePod(name: string): Action {
  return { tag: 'delete-pod', val: name };
}

/** Replace the policy-owned status. */
export function updateStatus(status: PodSetStatus): Action {
  return { tag: 'update-status', val: status };
}

/** Reconcile again after `ms` milliseconds even if nothing changes. */
export function requeueAfter(ms: number): Action {
  if (!Number.isInteger(ms) || ms < 0 || ms > 0xffff_ffff) {
    throw new PolicyError('InvalidAction', `requeue after ${ms} ms: out of range (0 to ${0xffff_ffff})`);
  }
  return { tag: 'requeue-after', val: ms };
}

/**
 * The WIT input with its 64-bit integers as numbers, converted in place. Inside the
 * component they are numbers already (jco's QuickJS backend), and nothing is copied: at
 * 100 pods, copying every pod into a new object took 665 µs a decision against 507 µs
 * without (`policy bench`, release, 2026-11-27; the boundary alone, a policy that decides
 * nothing: 409 µs). A JavaScript host's are BigInts (the native tests').
 */
export function podSetFromWit(input: wit.Input): Input {
  const converted = input as unknown as Input;
  if (typeof input.now !== 'number') {
    const p = converted.podset;
    p.generation = Number(p.generation);
    p.status.observedGeneration = Number(p.status.observedGeneration);
    for (const pod of converted.pods) pod.createdAt = Number(pod.createdAt);
    converted.now = Number(input.now);
  }
  return converted;
}

/** The component's exports for the PodSet policy `policy`, logging through the host's `log`. */
export function servePodSet(policy: PodSetPolicy, log: (level: Level, message: string) => void) {
  const out = logger(log);
  const declares = { parent: PODSET.gvk, children: [POD.gvk], related: [], finalizer: undefined, lookups: [] };
  return {
    identity: identityOf(policy.name, policy.version, declares),
    podset: {
      // The actions as they are: jco's QuickJS backend carries a 64-bit integer as a
      // number both ways, whatever the generated types say (`bigint`, a JavaScript
      // host's). A BigInt `observedGeneration` trapped the component (2026-11-27).
      decide: (input: wit.Input): wit.Action[] =>
        decision(input.now, () => policy.decide(podSetFromWit(input), out)) as unknown as wit.Action[],
    },
  };
}
