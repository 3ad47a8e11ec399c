// The SDK natively (`node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import {
  Kind,
  Lookups,
  PolicyError,
  condition,
  conditionsOf,
  deterministic,
  fromWit,
  rfc3339,
  sameJson,
  serve,
  setCondition,
  updateFrom,
} from '@podset/policy-sdk';
import { input, object } from '@podset/policy-sdk/testing';
import type { Input as witInput } from 'podset:policy/reconciler@0.4.0';

const CONFIG_MAP = new Kind('', 'v1', 'ConfigMap');

test('timestamps are what Kubernetes writes (the Rust SDK\'s vectors)', () => {
  assert.equal(rfc3339(0), '1970-01-01T00:00:00Z');
  assert.equal(rfc3339(1_795_357_669_123), '2026-11-22T14:27:49Z');
  assert.equal(rfc3339(951_782_400_000), '2000-02-29T00:00:00Z');
});

test('a condition keeps its transition time while its status holds', () => {
  let list = [condition('Available', false, 'Creating', '', 1_000)];
  list = setCondition(list, condition('Available', false, 'Scaling', '2 of 3', 9_000));
  assert.equal(list[0]?.lastTransitionTime, rfc3339(1_000));
  assert.equal(list[0]?.reason, 'Scaling');
  list = setCondition(list, condition('Available', true, 'Ready', '', 20_000));
  assert.equal(list[0]?.lastTransitionTime, rfc3339(20_000));
  list = setCondition(list, condition('Degraded', false, 'Fine', '', 20_000, 3));
  assert.deepEqual(
    list.map((c) => [c.type, c.observedGeneration]),
    [
      ['Available', undefined],
      ['Degraded', 3],
    ],
  );
  // Read back from an API object, only metav1.Condition's fields are kept.
  assert.deepEqual(conditionsOf([{ ...list[1], extra: 1 }]), [list[1]]);
});

test('a status is written only when it changed, whatever the order of its fields', () => {
  assert.deepEqual(updateFrom({ a: 1, b: [1, { c: 2 }] }, { b: [1, { c: 2 }], a: 1 }), []);
  assert.ok(sameJson({ a: 1, gone: undefined }, { a: 1 }));
  assert.deepEqual(updateFrom({ a: 2 }, { a: 1 }), [{ tag: 'update-status', val: '{"a":2}' }]);
});

test('the clock reads the input\'s time during a decision, and the real one after', () => {
  const at = deterministic(1_700_000_000_123, () => [Date.now(), new Date().getTime(), new Date(5).getTime()]);
  assert.deepEqual(at, [1_700_000_000_123, 1_700_000_000_123, 5]);
  assert.notEqual(Date.now(), 1_700_000_000_123);
});

test('the exports: info names the contract, errors become policy errors, 64-bit integers numbers', () => {
  const declarations = { parent: CONFIG_MAP.gvk, children: [], related: [], finalizer: undefined, lookups: [] };
  const seen: number[] = [];
  const exports = serve(
    {
      name: 'demo',
      version: '1.0.0',
      declarations,
      decide(i) {
        seen.push(i.now, i.parent.meta.generation);
        if (i.parent.meta.name === 'bad') throw new PolicyError('BadName', 'no');
        if (i.parent.meta.name === 'worse') throw new TypeError('x is undefined');
        return [];
      },
    },
    () => {},
  );
  assert.equal(exports.identity.info().contract, '0.4.0');
  // What the host passes: 64-bit integers as bigints.
  const wit = (name: string): witInput => {
    const i = input(object(CONFIG_MAP, name, {}));
    const parent = { ...i.parent, meta: { ...i.parent.meta, generation: 7n, createdAt: 1n } };
    return { ...i, parent, children: [], related: [], lookedUp: [], now: 42n };
  };
  assert.deepEqual(exports.reconciler.decide(wit('good')), []);
  assert.deepEqual(seen, [42, 7]);
  assert.throws(() => exports.reconciler.decide(wit('bad')), { reason: 'BadName', message: 'no' });
  assert.throws(() => exports.reconciler.decide(wit('worse')), { reason: 'Exception', message: 'TypeError: x is undefined' });
  assert.equal(fromWit(wit('good')).parent.meta.createdAt, 1);
});

test('lookups: answered ones read, unanswered ones asked for', () => {
  const i = input(object(CONFIG_MAP, 'p', {}));
  const found = object(CONFIG_MAP, 'settings', { data: { a: '1' } });
  i.lookedUp.push({ lookup: { kind: CONFIG_MAP.gvk, namespace: '', match: { tag: 'name', val: 'settings' } }, objects: [found] });
  const lookups = new Lookups(i);
  assert.equal(lookups.named(CONFIG_MAP, 'settings')?.meta.name, 'settings');
  assert.ok(lookups.answered());
  assert.deepEqual(lookups.labelled(CONFIG_MAP, { team: 'a' }), []);
  assert.ok(!lookups.answered());
  assert.deepEqual(
    lookups.finish().map((a) => a.tag),
    ['look-up', 'look-up'],
  );
});
