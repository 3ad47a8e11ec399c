// The decision, natively (`node --test`): the Rust policy's unit tests, in TypeScript.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PolicyError, logger } from '@podset/policy-sdk';
import type { Action, Input, Pod, PodSetStatus } from '@podset/policy-sdk/podset';
import { MAX_CREATES_PER_PASS, REQUEUE_AFTER_CAP_MS, decide as decideWith } from '../src/policy.ts';

function pod(name: string, fields: Partial<Pod> = {}): Pod {
  return { name, phase: 'running', ready: true, deleting: false, scheduled: true, createdAt: 1_000, restartCount: 0, ...fields };
}

function input(replicas: number, pods: Pod[] = []): Input {
  return {
    podset: {
      name: 'web',
      namespace: 'default',
      uid: 'u-web',
      generation: 1,
      labels: [],
      replicas,
      status: { podNames: [], availableReplicas: 0, observedGeneration: 0, conditions: [] },
    },
    pods,
    inFlight: { creations: 0, deletions: [] },
    now: 10_000,
  };
}

const decide = (i: Input): Action[] => decideWith(i, logger(() => {}));
const creates = (a: Action[]) => a.filter((x) => x.tag === 'create-pod').length;
const deletes = (a: Action[]) => a.flatMap((x) => (x.tag === 'delete-pod' ? [x.val] : []));
function status(a: Action[]): PodSetStatus {
  const s = a.find((x) => x.tag === 'update-status');
  assert.ok(s?.tag === 'update-status', `a status update in ${JSON.stringify(a)}`);
  return s.val;
}

test('scale from zero creates every missing pod in one pass', () => {
  const a = decide(input(5));
  assert.equal(creates(a), 5);
  assert.deepEqual(a[0], { tag: 'create-pod', val: { name: { tag: 'prefix', val: 'web-' }, labels: [], annotations: [] } });
  const s = status(a);
  assert.equal(s.availableReplicas, 0);
  assert.equal(s.observedGeneration, 1);
  assert.equal(s.conditions[0]?.status, 'false');
});

test('creations are capped per pass and a requeue asked', () => {
  const a = decide(input(250));
  assert.equal(creates(a), MAX_CREATES_PER_PASS);
  assert.ok(a.some((x) => x.tag === 'requeue-after' && x.val === REQUEUE_AFTER_CAP_MS));
});

test('in-flight creations count as pods', () => {
  const i = input(3, [pod('a')]);
  i.inFlight.creations = 2;
  assert.equal(creates(decide(i)), 0);
  i.inFlight.creations = 1;
  assert.equal(creates(decide(i)), 1);
});

test('failed, succeeded and terminating pods do not count', () => {
  const pods = [pod('a'), pod('f', { phase: 'failed' }), pod('s', { phase: 'succeeded' }), pod('t', { deleting: true })];
  const a = decide(input(2, pods));
  assert.equal(creates(a), 1);
  assert.deepEqual(deletes(a), [], 'inactive pods are never deleted by the policy');
  assert.deepEqual(status(a).podNames, ['a']);
});

test('scale-down follows the ReplicaSet ranking', () => {
  const pods = [
    pod('older'),
    pod('newer', { createdAt: 5_000 }),
    pod('not-ready', { ready: false }),
    pod('pending', { phase: 'pending', ready: false }),
    pod('unscheduled', { scheduled: false, phase: 'pending', ready: false }),
  ];
  assert.deepEqual(deletes(decide(input(1, pods))), ['unscheduled', 'pending', 'not-ready', 'newer']);
});

test("a scale-down's status names only the pods that stay", () => {
  const i = input(1, [pod('a'), pod('b'), pod('c')]);
  i.inFlight.deletions = ['c'];
  const a = decide(i);
  const s = status(a);
  const stay = ['a', 'b'].filter((n) => !deletes(a).includes(n));
  assert.deepEqual(s.podNames, stay, 'neither the pod deleted now nor the one in flight');
  assert.deepEqual([s.podNames.length, s.availableReplicas], [1, 1]);
  // Once the deletions are seen, the status written with them holds: nothing to do.
  i.podset.status = s;
  i.pods = i.pods.filter((p) => stay.includes(p.name));
  i.inFlight.deletions = [];
  assert.deepEqual(decide(i), []);
});

test('restarts rank before age', () => {
  assert.deepEqual(deletes(decide(input(1, [pod('newer', { createdAt: 9_000 }), pod('flaky', { restartCount: 4 })]))), ['flaky']);
});

test('in-flight deletions are not chosen again nor counted', () => {
  const i = input(1, [pod('a'), pod('b'), pod('c')]);
  i.inFlight.deletions = ['c'];
  const d = deletes(decide(i));
  assert.equal(d.length, 1);
  assert.ok(!d.includes('c'));
});

test('a converged PodSet yields no actions', () => {
  const i = input(2, [pod('b'), pod('a')]);
  i.podset.status = status(decide(i));
  assert.deepEqual(decide(i), []);
});

test('status names are sorted and count ready pods only', () => {
  const s = status(decide(input(2, [pod('b', { ready: false }), pod('a')])));
  assert.deepEqual(s.podNames, ['a', 'b']);
  assert.equal(s.availableReplicas, 1);
});

test('negative replicas is a policy error', () => {
  assert.throws(() => decide(input(-1)), (e: unknown) => e instanceof PolicyError && e.reason === 'InvalidReplicas');
});
