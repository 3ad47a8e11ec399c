/**
 * A policy that cannot decide says why: throw one from `decide`. The host reports it as
 * a `PolicyFailed` condition, a Warning Event and a metric, touches nothing, and retries
 * with backoff. Anything else thrown is reported the same way with reason `Exception`.
 */
export class PolicyError extends Error {
  /** A CamelCase reason, as in Kubernetes conditions. */
  readonly reason: string;

  constructor(reason: string, message: string) {
    super(message);
    this.name = 'PolicyError';
    this.reason = reason;
  }
}
