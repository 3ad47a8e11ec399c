// The decision, natively (`node --test`).
import assert from 'node:assert/strict';
import { test } from 'node:test';
import { input, object, statusOf } from '@podset/policy-sdk/testing';
import { {{KIND}}, decide, type {{Kind}}Status } from '../src/policy.ts';

test('a new {{Kind}} gets its ConfigMap and is not ready yet', () => {
  const actions = decide(input(object({{KIND}}, 'sample', { spec: { data: { greeting: 'hello' } } })));
  assert.equal(actions[0]?.tag, 'apply', 'applies the ConfigMap first');
  assert.match(actions[0]?.tag === 'apply' ? actions[0].val : '', /"greeting":"hello"/);
  const ready = statusOf<{{Kind}}Status>(actions)?.conditions?.[0];
  assert.deepEqual([ready?.type, ready?.status, ready?.reason], ['Ready', 'False', 'Syncing']);
});
