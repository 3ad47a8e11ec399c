// Generated from wit/policy.wit by policy-sdk-ts/generate.mjs: do not edit.
declare module 'podset:policy/log@0.4.0' {
  export function log(level: Level, message: string): void;
  /**
   * # Variants
   * 
   * ## `"trace"`
   * 
   * ## `"debug"`
   * 
   * ## `"info"`
   * 
   * ## `"warn"`
   * 
   * ## `"error"`
   */
  export type Level = 'trace' | 'debug' | 'info' | 'warn' | 'error';
}
