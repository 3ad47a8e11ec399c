// The glue between a policy written as plain functions and the component's exports.
// A component's entry file (`component.ts`, the only file that imports the WIT
// modules) is one line: `export const { identity, reconciler } = serve(policy, log);`.
// Everything else is ordinary TypeScript, unit-tested natively.

import type * as witTypes from 'podset:policy/types@0.4.0';
import type * as wit from 'podset:policy/reconciler@0.4.0';
import { CONTRACT } from './generated/contract.ts';
import { PolicyError } from './errors.ts';
import type { Action, Input, KubeObject } from './objects.ts';

export type Declarations = witTypes.Declarations;
export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';

/** Lines for the host's log, with the parent in context. */
export interface Logger {
  trace(message: string): void;
  debug(message: string): void;
  info(message: string): void;
  warn(message: string): void;
  error(message: string): void;
}

/** A logger over a `log(level, message)` function: the host's import, or a test's recorder. */
export function logger(log: (level: Level, message: string) => void): Logger {
  return {
    trace: (m) => log('trace', m),
    debug: (m) => log('debug', m),
    info: (m) => log('info', m),
    warn: (m) => log('warn', m),
    error: (m) => log('error', m),
  };
}

/** A reconcile policy: who it is, what it reconciles, and its decision. */
export interface Policy {
  name: string;
  version: string;
  declarations: Declarations;
  /** One decision: a pure function of `input`. Throw a `PolicyError` when it cannot decide. */
  decide(input: Input, log: Logger): Action[];
}

/** The component's exports for `policy`, logging through the host's `log`. */
export function serve(policy: Policy, log: (level: Level, message: string) => void) {
  const out = logger(log);
  return {
    identity: identityOf(policy.name, policy.version, policy.declarations),
    reconciler: {
      decide: (input: wit.Input): wit.Action[] => decision(input.now, () => policy.decide(fromWit(input), out)),
    },
  };
}

/** The `identity` export of either world: who the policy is, what it reconciles, and this SDK's contract. */
export function identityOf(name: string, version: string, declares: Declarations) {
  return { info: (): witTypes.PolicyInfo => ({ name, version, contract: CONTRACT, declares }) };
}

/**
 * One decision of either world: `decide` run with the clock at the input's `now`
 * ([`deterministic`]), and what it throws as the `policy-error` jco returns for a thrown
 * value (the result's `err`): a `PolicyError` as it is, anything else with reason
 * `Exception`.
 */
export function decision<T>(now: number | bigint, decide: () => T): T {
  try {
    return deterministic(Number(now), decide);
  } catch (e) {
    throw e instanceof PolicyError
      ? { reason: e.reason, message: e.message }
      : { reason: 'Exception', message: e instanceof Error ? `${e.name}: ${e.message}` : String(e) };
  }
}

/**
 * Runs `decide` with the clock standing at `now` (the input's time): `Date.now()` and
 * `new Date()` read it, so a policy that reads the clock decides the same on every run.
 * (The component has no clock: QuickJS's own would trap, without a message.)
 * `Math.random` needs nothing: QuickJS seeds it when the component is built, so every
 * fresh instance draws the same numbers.
 */
export function deterministic<T>(now: number, decide: () => T): T {
  const RealDate = globalThis.Date;
  class InputDate extends RealDate {
    constructor(...args: unknown[]) {
      if (args.length === 0) super(now);
      else super(...(args as [string | number]));
    }
    static override now(): number {
      return now;
    }
  }
  globalThis.Date = InputDate as DateConstructor;
  try {
    return decide();
  } finally {
    globalThis.Date = RealDate;
  }
}

function object(o: wit.Object): KubeObject {
  return { ...o, meta: { ...o.meta, generation: Number(o.meta.generation), createdAt: Number(o.meta.createdAt) } };
}

/** The WIT input with its 64-bit integers as numbers. */
export function fromWit(input: wit.Input): Input {
  return {
    ...input,
    parent: object(input.parent),
    children: input.children.map(object),
    related: input.related.map(object),
    lookedUp: input.lookedUp.map((a) => ({ ...a, objects: a.objects.map(object) })),
    now: Number(input.now),
  };
}
