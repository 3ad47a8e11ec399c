// The SDK's typed PodSet world natively (`node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { PolicyError } from '@podset/policy-sdk';
import { type Action, createPod, deletePod, requeueAfter, servePodSet, updateStatus } from '@podset/policy-sdk/podset';
import type { Input as witInput } from 'podset:policy/podset@0.4.0';

function witInput(): witInput {
  return {
    podset: {
      name: 'web',
      namespace: 'ns',
      uid: 'u',
      generation: 3n,
      labels: [{ key: 'app', value: 'web' }],
      replicas: 2,
      status: { podNames: ['web-a'], availableReplicas: 1, observedGeneration: 2n, conditions: [] },
    },
    pods: [
      { name: 'web-a', phase: 'running', ready: true, deleting: false, scheduled: true, createdAt: 1_700_000_000_000n, restartCount: 2 },
    ],
    inFlight: { creations: 1, deletions: ['web-c'] },
    now: 1_700_000_100_000n,
  };
}

function served(decide: () => Action[]) {
  return servePodSet({ name: 'test', version: '1', decide }, () => {});
}

test('the input reaches the decision with numbers, and every action goes back', () => {
  let seen: unknown;
  const exports = servePodSet(
    {
      name: 'test',
      version: '1',
      decide(input) {
        seen = input;
        return [
          createPod({ generateName: 'web-', labels: { b: '2', a: '1' } }),
          createPod({ name: 'web-0' }),
          deletePod('web-a'),
          updateStatus({ podNames: ['web-a'], availableReplicas: 1, observedGeneration: input.podset.generation, conditions: [] }),
          requeueAfter(1_500),
        ];
      },
    },
    () => {},
  );
  const out = exports.podset.decide(witInput());
  const input = seen as { podset: { generation: number; status: { observedGeneration: number } }; pods: { createdAt: number }[]; now: number };
  assert.deepEqual(
    [input.podset.generation, input.podset.status.observedGeneration, input.pods[0]?.createdAt, input.now],
    [3, 2, 1_700_000_000_000, 1_700_000_100_000],
  );
  assert.deepEqual(out, [
    { tag: 'create-pod', val: { name: { tag: 'prefix', val: 'web-' }, labels: [{ key: 'a', value: '1' }, { key: 'b', value: '2' }], annotations: [] } },
    { tag: 'create-pod', val: { name: { tag: 'exact', val: 'web-0' }, labels: [], annotations: [] } },
    { tag: 'delete-pod', val: 'web-a' },
    // A number: jco's QuickJS backend lowers a 64-bit integer from one (a BigInt traps).
    { tag: 'update-status', val: { podNames: ['web-a'], availableReplicas: 1, observedGeneration: 3, conditions: [] } },
    { tag: 'requeue-after', val: 1_500 },
  ]);
});

test('a bad action or a throw is a policy error', () => {
  assert.throws(() => createPod({ name: 'a', generateName: 'b-' }), (e: unknown) => e instanceof PolicyError && e.reason === 'InvalidAction');
  assert.throws(() => createPod({}), (e: unknown) => e instanceof PolicyError && e.reason === 'InvalidAction');
  assert.throws(() => requeueAfter(-1), (e: unknown) => e instanceof PolicyError && e.reason === 'InvalidAction');
  assert.throws(
    () => served(() => { throw new PolicyError('InvalidReplicas', 'negative'); }).podset.decide(witInput()),
    (e: unknown) => JSON.stringify(e) === JSON.stringify({ reason: 'InvalidReplicas', message: 'negative' }),
  );
  assert.throws(
    () => served(() => { throw new TypeError('boom'); }).podset.decide(witInput()),
    (e: unknown) => JSON.stringify(e) === JSON.stringify({ reason: 'Exception', message: 'TypeError: boom' }),
  );
});

test("the identity is the world's: PodSets owning Pods", () => {
  const info = served(() => []).identity.info();
  assert.deepEqual([info.declares.parent, info.declares.children], [
    { group: 'app.example.com', version: 'v1alpha1', kind: 'PodSet' },
    [{ group: '', version: 'v1', kind: 'Pod' }],
  ]);
});
