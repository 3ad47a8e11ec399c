// What a decision returns: the action builders, and a status written only when it changed.

import type { Action, Event, ObjectKey } from './objects.ts';
import type { Kind } from './objects.ts';

/** Create or update a child by server-side apply (`apiVersion`, `kind`, `metadata.name`). */
export function apply(child: object): Action {
  return { tag: 'apply', val: JSON.stringify(child) };
}

/** Create a child (`metadata.name` or `metadata.generateName`). */
export function create(child: object): Action {
  return { tag: 'create', val: JSON.stringify(child) };
}

/** Delete the child of `kind` named `name` (with its UID as a precondition). */
export function deleteChild(kind: Kind, name: string): Action {
  return { tag: 'delete', val: kind.key(name) };
}

/** Replace the parent's `status`; the host skips it when equal. */
export function updateStatus(status: object): Action {
  return { tag: 'update-status', val: JSON.stringify(status) };
}

/** An Event on the parent (rate-limited per parent), optionally about one of its children. */
export function event(type: Event['type'], reason: string, message: string, regarding?: ObjectKey): Action {
  return { tag: 'emit-event', val: { type, reason, message, regarding } };
}

/** Reconcile again after `millis` even if nothing changes. */
export function requeueAfter(millis: number): Action {
  return { tag: 'requeue-after', val: millis };
}

/** The parent is being deleted and the policy's cleanup is done: remove the finalizer. */
export function finalizeDone(): Action {
  return { tag: 'finalize-done' };
}

/**
 * The annotation that puts a child in a wave: the host creates or applies a child of
 * wave `n` only once every child of a lower wave is ready. Absent: wave 0.
 */
export const WAVE = 'podset.dev/wave';
/** The annotation with the rules that say a child is ready (a JSON list). */
export const READY_WHEN = 'podset.dev/ready-when';

/** `child` (an object with `metadata`) in wave `n`. */
export function inWave<T extends { metadata: { annotations?: Record<string, string> } }>(child: T, n: number): T {
  child.metadata.annotations = { ...child.metadata.annotations, [WAVE]: String(n) };
  return child;
}

/**
 * `update-status` with `next` when it differs from `current` (compared as JSON), else
 * nothing: a converged parent gets no actions, so no write and no hot loop.
 */
export function updateFrom(next: object, current: object): Action[] {
  return sameJson(next, current) ? [] : [updateStatus(next)];
}

/** Whether two JSON values are equal (object keys in any order; `undefined` fields absent). */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a) || Array.isArray(b)) {
    return Array.isArray(a) && Array.isArray(b) && a.length === b.length && a.every((x, i) => sameJson(x, b[i]));
  }
  if (a === null || b === null || typeof a !== 'object' || typeof b !== 'object') return false;
  const fields = (o: object) => Object.entries(o).filter(([, v]) => v !== undefined);
  const [fa, fb] = [fields(a), new Map(fields(b))];
  return fa.length === fb.size && fa.every(([k, v]) => fb.has(k) && sameJson(v, fb.get(k)));
}
