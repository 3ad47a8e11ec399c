/// <reference path="./generated/policy.d.ts" />
// Write a podset-host reconcile policy in TypeScript. The contract is wit/policy.wit;
// its types are generated into src/generated/ (`make ts-bindings`, drift-checked), and
// this package holds the helpers around them, so that a policy is:
//
//   export const policy: Policy = { name, version, declarations, decide(input, log) { … } };
//
// `decide` is an ordinary function: unit-test it natively (`node --test`) with inputs
// built by `@podset/policy-sdk/testing`. The component's entry file wires it to the
// host: `export const { identity, reconciler } = serve(policy, log);`.

export * from './actions.ts';
export * from './conditions.ts';
export { CONTRACT } from './generated/contract.ts';
export * from './errors.ts';
export * from './lookups.ts';
export * from './objects.ts';
export * from './serve.ts';
export { rfc3339 } from './time.ts';
