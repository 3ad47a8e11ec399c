// {{Kind}}: a reconcile policy for podset-host.
//
// A `{{Kind}}` owns a ConfigMap holding `spec.data`; its status says whether the
// ConfigMap holds it. Change `decide` to do what your operator does: it is a plain
// function from what the host observed to what it should do.

import {
  type Action,
  type Condition,
  Kind,
  type Input,
  type Policy,
  apply,
  body,
  child,
  condition,
  conditionsOf,
  sameJson,
  setCondition,
  spec,
  status,
  updateFrom,
} from '@podset/policy-sdk';

export const {{KIND}} = new Kind('{{group}}', 'v1alpha1', '{{Kind}}');
export const CONFIG_MAP = new Kind('', 'v1', 'ConfigMap');

/** What a {{Kind}} asks for (the CRD: crd.yaml). */
export interface {{Kind}}Spec {
  /** The data the owned ConfigMap holds. */
  data?: Record<string, string>;
}

/** What the policy observed. */
export interface {{Kind}}Status {
  /** `Ready`: the ConfigMap holds `spec.data`. */
  conditions?: Condition[];
}

export const policy: Policy = {
  name: '{{crate}}-ts',
  version: '0.1.0',
  declarations: { parent: {{KIND}}.gvk, children: [CONFIG_MAP.gvk], related: [], finalizer: undefined, lookups: [] },
  decide,
};

export function decide(input: Input): Action[] {
  const parent = input.parent;
  const data = spec<{{Kind}}Spec>(parent).data ?? {};
  const conditions = conditionsOf(status<{{Kind}}Status>(parent).conditions);
  const current: {{Kind}}Status = conditions.length ? { conditions } : {};
  const name = `${parent.meta.name}-data`;
  // Re-stated every time: the host drops an apply whose fields all hold already.
  const actions = [apply({ apiVersion: 'v1', kind: 'ConfigMap', metadata: { name }, data })];
  const held = child(input, CONFIG_MAP, name);
  const ready = held !== undefined && sameJson(body(held)['data'] ?? {}, data);
  const [reason, message] = ready ? ['Synced', 'the ConfigMap holds spec.data'] : ['Syncing', 'writing the ConfigMap'];
  const next = {
    conditions: setCondition(conditions, condition('Ready', ready, reason, message, input.now, parent.meta.generation)),
  };
  return [...actions, ...updateFrom(next, current)];
}
