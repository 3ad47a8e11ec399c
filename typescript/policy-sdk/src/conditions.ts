// Status conditions as the Kubernetes API conventions want them (`metav1.Condition`):
// one per type, and `lastTransitionTime` moves only when the status does — else every
// reconcile would rewrite the status.

import { rfc3339 } from './time.ts';

/** `metav1.Condition`. */
export interface Condition {
  type: string;
  /** `True`, `False` or `Unknown`. */
  status: string;
  /** CamelCase reason for the last transition. */
  reason: string;
  message: string;
  /** When the status last changed (RFC 3339). */
  lastTransitionTime: string;
  /** The `metadata.generation` the condition was set for. */
  observedGeneration?: number;
}

/** A condition as of `now` (milliseconds, `input.now`), for `generation` when given. */
export function condition(
  type: string,
  status: boolean,
  reason: string,
  message: string,
  now: number,
  generation?: number,
): Condition {
  const c: Condition = { type, status: status ? 'True' : 'False', reason, message, lastTransitionTime: rfc3339(now) };
  if (generation !== undefined) c.observedGeneration = generation;
  return c;
}

/**
 * `conditions` with `next` in place of any condition of its type, keeping the old
 * `lastTransitionTime` when the status did not change; sorted by type.
 */
export function setCondition(conditions: readonly Condition[], next: Condition): Condition[] {
  const old = conditions.find((c) => c.type === next.type && c.status === next.status);
  const kept = old ? { ...next, lastTransitionTime: old.lastTransitionTime } : next;
  return [...conditions.filter((c) => c.type !== next.type), kept].sort((a, b) =>
    a.type < b.type ? -1 : a.type > b.type ? 1 : 0,
  );
}

export function findCondition(conditions: readonly Condition[], type: string): Condition | undefined {
  return conditions.find((c) => c.type === type);
}

export function isTrue(c: Condition | undefined): boolean {
  return c?.status === 'True';
}

/**
 * The conditions of a status as read from the API (a list of anything): each with the
 * fields of `metav1.Condition` only, as a typed reader keeps them.
 */
export function conditionsOf(value: unknown): Condition[] {
  if (!Array.isArray(value)) return [];
  return value.map((raw: Record<string, unknown>) => {
    const text = (k: string) => (typeof raw[k] === 'string' ? (raw[k] as string) : '');
    const c: Condition = {
      type: text('type'),
      status: text('status'),
      reason: text('reason'),
      message: text('message'),
      lastTransitionTime: text('lastTransitionTime'),
    };
    if (typeof raw['observedGeneration'] === 'number') c.observedGeneration = raw['observedGeneration'];
    return c;
  });
}
