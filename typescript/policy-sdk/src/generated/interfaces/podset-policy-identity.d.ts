// Generated from wit/policy.wit by typescript/policy-sdk/generate.mjs: do not edit.
/// <reference path="./podset-policy-types.d.ts" />
declare module 'podset:policy/identity@0.4.0' {
  export function info(): PolicyInfo;
  export type PolicyInfo = import('podset:policy/types@0.4.0').PolicyInfo;
}
