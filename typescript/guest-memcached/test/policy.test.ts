// The decision, natively (`node --test`): the Rust policy's unit tests, in TypeScript.
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { type Condition, type KubeObject, findCondition, isTrue } from '@podset/policy-sdk';
import { applied, beingDeleted, input, labelled, object, statusOf } from '@podset/policy-sdk/testing';
import { DEPLOYMENT, IMAGE, INSTANCE_LABEL, MEMCACHED, type MemcachedStatus, NAME_LABEL, POD, decide } from '../src/policy.ts';

function memcached(size: unknown, status: object): KubeObject {
  return object(MEMCACHED, 'cache', { spec: { size, containerPort: 11211 }, status });
}

function pod(name: string, phase: string): KubeObject {
  return labelled(labelled(object(POD, name, { status: { phase } }), NAME_LABEL, 'memcached'), INSTANCE_LABEL, 'cache');
}

/** A Deployment whose controller has acted on its spec (generation 1). */
function deploymentWith(replicas: number, ready: number, generation = 1): KubeObject {
  const d = object(DEPLOYMENT, 'cache', {
    spec: { replicas },
    status: { observedGeneration: 1, replicas, readyReplicas: ready, updatedReplicas: replicas },
  });
  return { ...d, meta: { ...d.meta, generation } };
}

function condition(s: MemcachedStatus | undefined, type: string): Condition {
  const c = findCondition(s?.conditions ?? [], type);
  assert.ok(c, `a ${type} condition in ${JSON.stringify(s)}`);
  return c;
}

test('a new Memcached gets its Deployment and a Creating status', () => {
  const actions = decide(input(memcached(3, {})));
  const [d] = applied(actions);
  assert.equal(actions[0]?.tag, 'apply', 'applies the Deployment first');
  assert.equal(d?.spec.replicas, 3);
  const c = d?.spec.template.spec.containers[0];
  assert.equal(c.image, IMAGE);
  assert.deepEqual(c.command, ['memcached', '-p', '11211', '-m', '64', '-o', 'modern', '-v']);
  assert.equal(c.securityContext.runAsNonRoot, true);
  const available = condition(statusOf(actions), 'Available');
  assert.deepEqual([available.status, available.reason], ['False', 'Creating']);
});

test('the status lists the pods, and a converged Memcached costs nothing but the apply', () => {
  const i = input(memcached(2, {}));
  i.children.push(deploymentWith(2, 2));
  i.related = [pod('cache-b', 'Running'), pod('cache-a', 'Running'), pod('cache-x', 'Failed')];
  const s = statusOf<MemcachedStatus>(decide(i));
  assert.deepEqual(s?.nodes, ['cache-a', 'cache-b']);
  assert.ok(isTrue(condition(s, 'Available')));
  assert.ok(!isTrue(condition(s, 'Progressing')));
  // The status written, the next decision re-states the Deployment only.
  const again = decide({ ...i, parent: memcached(2, s ?? {}), now: i.now + 60_000 });
  assert.deepEqual(
    again.map((a) => a.tag),
    ['apply'],
  );
});

test('scaling is progressing until every pod is ready', () => {
  const i = input(memcached(5, {}));
  i.children.push(deploymentWith(5, 3));
  const s = statusOf<MemcachedStatus>(decide(i));
  const available = condition(s, 'Available');
  assert.deepEqual([available.status, available.reason], ['False', 'Scaling']);
  assert.equal(available.message, 'Deployment cache is not yet ready at size 5');
  assert.ok(isTrue(condition(s, 'Progressing')));
});

test('a Deployment status older than its spec is still progressing', () => {
  const up = input(memcached(3, {}));
  up.children.push(deploymentWith(1, 1, 2));
  const s = statusOf<MemcachedStatus>(decide(up));
  const progressing = condition(s, 'Progressing');
  assert.deepEqual([progressing.status, progressing.reason], ['True', 'Updating']);
  assert.match(progressing.message, /rolling out at size 3/);
  assert.ok(!isTrue(condition(s, 'Available')));

  const down = input(memcached(1, {}));
  down.children.push(deploymentWith(3, 3, 2));
  const d = statusOf<MemcachedStatus>(decide(down));
  assert.ok(isTrue(condition(d, 'Available')));
  assert.ok(isTrue(condition(d, 'Progressing')));
});

test("deletion runs the seed's finalizer flow", () => {
  const actions = decide(input(beingDeleted(memcached(3, {}))));
  const degraded = condition(statusOf(actions), 'Degraded');
  assert.deepEqual([degraded.status, degraded.reason], ['True', 'Finalizing']);
  assert.ok(actions.some((a) => a.tag === 'emit-event' && a.val.reason === 'Deleting' && a.val.type === 'warning'));
  assert.equal(actions.at(-1)?.tag, 'finalize-done', 'finalize-done comes last');
  assert.ok(!actions.some((a) => a.tag === 'apply'), 'nothing is applied while finalizing');
});

test('a spec that does not parse is a policy error', () => {
  assert.throws(() => decide(input(memcached('three', {}))), { name: 'PolicyError', reason: 'InvalidSpec' });
});
