// Generated from wit/policy.wit by typescript/policy-sdk/generate.mjs: do not edit.

/** The version of the contract (wit/policy.wit's package) these types are of. */
export const CONTRACT = '0.4.0';
