// Objects, kinds and the input of the any-kind world (`reconcile-policy`), as a policy
// reads them: the WIT records (src/generated/, from wit/policy.wit) with their 64-bit
// integers as numbers (milliseconds since the epoch and generations fit in 2^53).

import type * as wit from 'podset:policy/reconciler@0.4.0';
import { PolicyError } from './errors.ts';

export type GroupVersionKind = wit.GroupVersionKind;
export type KeyValue = wit.KeyValue;
export type ObjectKey = wit.ObjectKey;
export type InFlight = wit.InFlight;
export type Lookup = wit.Lookup;
export type Action = wit.Action;
export type Event = wit.Event;

/** `metadata` as the host reads it. */
export type ObjectMeta = Omit<wit.ObjectMeta, 'generation' | 'createdAt'> & {
  generation: number;
  /** `metadata.creationTimestamp`, milliseconds since the Unix epoch. */
  createdAt: number;
};

/** One object: its kind, its metadata, and everything else (`spec`, `status`, `data`, …) as JSON text. */
export type KubeObject = Omit<wit.Object, 'meta'> & { meta: ObjectMeta };

/** The host's answer to one lookup. */
export type Answer = Omit<wit.Answer, 'objects'> & { objects: KubeObject[] };

/** What a decision sees (`reconciler.input`). */
export type Input = Omit<wit.Input, 'parent' | 'children' | 'related' | 'lookedUp' | 'now'> & {
  parent: KubeObject;
  children: KubeObject[];
  related: KubeObject[];
  lookedUp: Answer[];
  /** The host's clock, milliseconds since the Unix epoch. Policies have no clock of their own. */
  now: number;
};

/** A Kubernetes kind known when the policy is written: `new Kind('apps', 'v1', 'Deployment')`. */
export class Kind {
  constructor(
    readonly group: string,
    readonly version: string,
    readonly kind: string,
  ) {}

  get gvk(): GroupVersionKind {
    return { group: this.group, version: this.version, kind: this.kind };
  }

  /** `apps/v1`, or `v1` for the core group. */
  get apiVersion(): string {
    return this.group === '' ? this.version : `${this.group}/${this.version}`;
  }

  is(gvk: GroupVersionKind): boolean {
    return gvk.group === this.group && gvk.version === this.version && gvk.kind === this.kind;
  }

  /** Names a child of this kind. */
  key(name: string): ObjectKey {
    return { kind: this.gvk, name };
  }
}

/** The body (everything but `metadata`) as JSON. */
export function body(o: KubeObject): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(o.body);
    return parsed !== null && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : {};
  } catch (e) {
    throw new PolicyError('InvalidObject', `${o.meta.name}: ${String(e)}`);
  }
}

/** `spec`, as the policy's type for it: checking its fields is the policy's part. */
export function spec<T>(o: KubeObject): T {
  return (body(o)['spec'] ?? {}) as T;
}

/** `status`, or `{}` while there is none. */
export function status<T>(o: KubeObject): Partial<T> {
  return (body(o)['status'] ?? {}) as Partial<T>;
}

export function label(o: KubeObject, key: string): string | undefined {
  return o.meta.labels.find((kv) => kv.key === key)?.value;
}

/** The children of `kind` the parent controls. */
export function children(input: Input, kind: Kind): KubeObject[] {
  return input.children.filter((o) => kind.is(o.kind));
}

/** The child of `kind` named `name`, if the parent controls one. */
export function child(input: Input, kind: Kind, name: string): KubeObject | undefined {
  return children(input, kind).find((o) => o.meta.name === name);
}

/** The related objects of `kind` that matched the policy's selector. */
export function related(input: Input, kind: Kind): KubeObject[] {
  return input.related.filter((o) => kind.is(o.kind));
}

/** The host created this child and has not seen it yet: never create it again. */
export function creating(input: Input, kind: Kind, name: string): boolean {
  return input.inFlight.creations.some((k) => kind.is(k.kind) && k.name === name);
}

/** The host deleted this child and has not seen it go yet: never count it. */
export function deleting(input: Input, kind: Kind, name: string): boolean {
  return input.inFlight.deletions.some((k) => kind.is(k.kind) && k.name === name);
}
