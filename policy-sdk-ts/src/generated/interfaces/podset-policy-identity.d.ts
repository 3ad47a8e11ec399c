// Generated from wit/policy.wit by policy-sdk-ts/generate.mjs: do not edit.
/// <reference path="./podset-policy-types.d.ts" />
declare module 'podset:policy/identity@0.4.0' {
  export function info(): PolicyInfo;
  export type PolicyInfo = import('podset:policy/types@0.4.0').PolicyInfo;
}
