// Generated from wit/policy.wit by policy-sdk-ts/generate.mjs: do not edit.

/** The version of the contract (wit/policy.wit's package) these types are of. */
export const CONTRACT = '0.4.0';
