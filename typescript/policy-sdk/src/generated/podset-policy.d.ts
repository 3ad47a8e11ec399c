// Generated from wit/policy.wit by typescript/policy-sdk/generate.mjs: do not edit.
/// <reference path="./interfaces/podset-policy-identity.d.ts" />
/// <reference path="./interfaces/podset-policy-log.d.ts" />
/// <reference path="./interfaces/podset-policy-podset.d.ts" />
/// <reference path="./interfaces/podset-policy-types.d.ts" />
declare module 'podset:policy/podset-policy@0.4.0' {
  export type * as PodsetPolicyLog040 from 'podset:policy/log@0.4.0'; // import podset:policy/log@0.4.0
  export type * as PodsetPolicyTypes040 from 'podset:policy/types@0.4.0'; // import podset:policy/types@0.4.0
  export * as identity from 'podset:policy/identity@0.4.0'; // export podset:policy/identity@0.4.0
  export * as podset from 'podset:policy/podset@0.4.0'; // export podset:policy/podset@0.4.0
}
