// Inputs for native unit tests of a policy, built the way the host builds them, and
// readers of the actions a decision returns.

import type { Action, Input, KubeObject } from './objects.ts';
import type { Kind } from './objects.ts';
import { logger, type Level, type Logger } from './serve.ts';

/** An object of `kind` named `name` in namespace `default`, with `body` (spec, status, …). */
export function object(kind: Kind, name: string, body: object): KubeObject {
  return {
    kind: kind.gvk,
    meta: {
      name,
      namespace: 'default',
      uid: `uid-${name}`,
      generation: 1,
      resourceVersion: '1',
      labels: [],
      annotations: [],
      createdAt: 1_700_000_000_000,
      deleting: false,
      finalizers: [],
    },
    body: JSON.stringify(body),
  };
}

/** `o` with one more label. */
export function labelled(o: KubeObject, key: string, value: string): KubeObject {
  return { ...o, meta: { ...o.meta, labels: [...o.meta.labels, { key, value }] } };
}

/** `o` being deleted. */
export function beingDeleted(o: KubeObject): KubeObject {
  return { ...o, meta: { ...o.meta, deleting: true } };
}

/** An input for `parent` with nothing else observed, at a fixed `now`. */
export function input(parent: KubeObject): Input {
  return { parent, children: [], related: [], lookedUp: [], inFlight: { creations: [], deletions: [] }, now: 1_700_000_100_000 };
}

/** The status a decision writes, if it writes one. */
export function statusOf<T>(actions: Action[]): T | undefined {
  const update = actions.find((a) => a.tag === 'update-status');
  return update ? (JSON.parse(update.val) as T) : undefined;
}

/** The objects a decision applies. */
export function applied(actions: Action[]): Record<string, any>[] {
  return actions.flatMap((a) => (a.tag === 'apply' ? [JSON.parse(a.val) as Record<string, any>] : []));
}

/** A logger that keeps every line, for tests. */
export function recorder(): Logger & { lines: [Level, string][] } {
  const lines: [Level, string][] = [];
  return Object.assign(logger((level, message) => lines.push([level, message])), { lines });
}
