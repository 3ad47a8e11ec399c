// The operator-sdk Memcached operator as a reconcile policy, in TypeScript: a
// `Memcached` owns a Deployment of memcached pods, kept at `spec.size`, with its status
// filled from the Deployment and its pods, and the seed's finalizer flow on deletion.
// It decides what guest-memcached/ (Rust) decides, on the same scenario files.

import {
  type Action,
  type Condition,
  Kind,
  type Input,
  type KubeObject,
  type Policy,
  PolicyError,
  apply,
  child,
  condition,
  conditionsOf,
  event,
  finalizeDone,
  findCondition,
  related,
  setCondition,
  spec,
  status,
  updateFrom,
} from '@podset/policy-sdk';

export const MEMCACHED = new Kind('cache.example.com', 'v1alpha1', 'Memcached');
export const DEPLOYMENT = new Kind('apps', 'v1', 'Deployment');
export const POD = new Kind('', 'v1', 'Pod');
/** The seed's finalizer. */
export const FINALIZER = 'cache.example.com/finalizer';
/** The labels on every memcached pod; the related pods are selected by them. */
export const NAME_LABEL = 'app.kubernetes.io/name';
export const INSTANCE_LABEL = 'app.kubernetes.io/instance';
/** The image the seed runs, built locally for the embedded cluster. */
export const IMAGE = 'memcached:1.6.18';
/** A non-root user for memcached (the seed's choice). */
const RUN_AS_USER = 1001;

/** A memcached cluster: a Deployment of `size` memcached pods (the CRD: manifests/crd/memcached.yaml). */
export interface MemcachedSpec {
  size: number;
  containerPort: number;
}

/** What the policy observed. */
export interface MemcachedStatus {
  conditions?: Condition[];
  /** Names of the memcached pods, sorted. */
  nodes?: string[];
}

export const policy: Policy = {
  name: 'guest-memcached-ts',
  version: '0.1.0',
  declarations: {
    parent: MEMCACHED.gvk,
    children: [DEPLOYMENT.gvk],
    related: [
      {
        kind: POD.gvk,
        selector: [
          { key: NAME_LABEL, value: { tag: 'exact', val: 'memcached' } },
          { key: INSTANCE_LABEL, value: { tag: 'parent-name' } },
        ],
      },
    ],
    finalizer: FINALIZER,
    lookups: [],
  },
  decide,
};

export function decide(input: Input): Action[] {
  const parent = input.parent;
  const wanted = memcachedSpec(parent);
  const current = memcachedStatus(parent);
  if (parent.meta.deleting) return finalize(input, current);
  return [apply(deployment(parent, wanted)), ...updateFrom(observedStatus(input, wanted, current), current)];
}

/** `spec`, checked as the CRD's schema and the Rust policy's types read it. */
function memcachedSpec(parent: KubeObject): MemcachedSpec {
  const s = spec<Record<string, unknown>>(parent);
  const integer = (field: string, fallback?: number): number => {
    const v = s[field] ?? fallback;
    if (typeof v !== 'number' || !Number.isInteger(v)) {
      throw new PolicyError('InvalidSpec', `${parent.meta.name} spec: ${field} is ${JSON.stringify(v)}, not an integer`);
    }
    return v;
  };
  return { size: integer('size'), containerPort: integer('containerPort', 11211) };
}

/** The status's fields this policy owns (`policyDigest` is the host's). */
function memcachedStatus(parent: KubeObject): MemcachedStatus {
  const s = status<MemcachedStatus>(parent);
  return withoutEmpty({ conditions: conditionsOf(s.conditions), nodes: Array.isArray(s.nodes) ? s.nodes : [] });
}

/** Empty lists are left out, as the CRD's writers leave them out. */
function withoutEmpty(s: MemcachedStatus): MemcachedStatus {
  const out: MemcachedStatus = {};
  if (s.conditions?.length) out.conditions = s.conditions;
  if (s.nodes?.length) out.nodes = s.nodes;
  return out;
}

/**
 * The Deployment named after the Memcached: `size` replicas of memcached, non-root under
 * the restricted profile, its pods labelled so the policy finds them.
 */
export function deployment(parent: KubeObject, s: MemcachedSpec): object {
  const name = parent.meta.name;
  const labels = { [NAME_LABEL]: 'memcached', [INSTANCE_LABEL]: name };
  return {
    apiVersion: 'apps/v1',
    kind: 'Deployment',
    metadata: { name, labels },
    spec: {
      replicas: s.size,
      selector: { matchLabels: labels },
      template: {
        metadata: { labels },
        spec: {
          securityContext: { runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } },
          containers: [
            {
              name: 'memcached',
              image: IMAGE,
              imagePullPolicy: 'IfNotPresent',
              // The seed writes `-p=11211 -m=64`; memcached's getopt then reads "=64" as
              // 0 MB, and 1.6 refuses to start. Separate values mean what the seed meant.
              command: ['memcached', '-p', String(s.containerPort), '-m', '64', '-o', 'modern', '-v'],
              ports: [{ containerPort: s.containerPort, name: 'memcached' }],
              securityContext: {
                runAsNonRoot: true,
                runAsUser: RUN_AS_USER,
                allowPrivilegeEscalation: false,
                capabilities: { drop: ['ALL'] },
              },
            },
          ],
        },
      },
    },
  };
}

/** The fields of the Deployment's status the policy reads. */
interface DeploymentStatus {
  observedGeneration: number;
  readyReplicas: number;
  updatedReplicas: number;
  replicas: number;
}

function deploymentStatus(d: KubeObject | undefined): DeploymentStatus {
  const s = d ? status<DeploymentStatus>(d) : {};
  return {
    observedGeneration: s.observedGeneration ?? 0,
    readyReplicas: s.readyReplicas ?? 0,
    updatedReplicas: s.updatedReplicas ?? 0,
    replicas: s.replicas ?? 0,
  };
}

function observedStatus(input: Input, s: MemcachedSpec, current: MemcachedStatus): MemcachedStatus {
  const { name, generation } = input.parent.meta;
  const now = input.now;
  const found = child(input, DEPLOYMENT, name);
  const ds = deploymentStatus(found);
  const nodes = related(input, POD)
    .filter((pod) => {
      const phase = status<{ phase: string }>(pod).phase ?? 'Pending';
      return !pod.meta.deleting && (phase === 'Pending' || phase === 'Running');
    })
    .map((pod) => pod.meta.name)
    .sort();

  // A Deployment its controller has not acted on yet (no observed generation) is still
  // being created (guest-memcached/src/reconcile.rs).
  const acted = found !== undefined && ds.observedGeneration > 0 ? found : undefined;
  const available = acted !== undefined && ds.readyReplicas >= s.size;
  // Said without the count of ready pods, as the Deployment's own conditions are: each
  // move of the count was a status write (guest-memcached/src/reconcile.rs).
  // A new Memcached is "Creating" until its Deployment is first ready: that controller's
  // first status changes nothing a user reads (guest-memcached/src/reconcile.rs).
  const creating = findCondition(current.conditions ?? [], 'Available')?.reason === 'Creating';
  const [reason, message] = available
    ? ['Ready', `Deployment ${name} is ready at size ${s.size}`]
    : acted && !creating
      ? ['Scaling', `Deployment ${name} is not yet ready at size ${s.size}`]
      : ['Creating', `Creating Deployment ${name} with ${s.size} replicas`];
  // Counts the Deployment controller wrote before it saw the Deployment's latest spec
  // are those of the spec before (as `kubectl rollout status` reads them): the rollout
  // is still under way, whatever they say.
  const behind = acted !== undefined && ds.observedGeneration < acted.meta.generation;
  const progressing = behind || !available || ds.updatedReplicas !== s.size || ds.replicas !== s.size;
  // One pair of words from the apply until the rollout is complete: a status write each
  // time they changed (guest-memcached/src/reconcile.rs).
  const [progressReason, progressMessage] =
    reason === 'Creating'
      ? [reason, message]
      : progressing
        ? ['Updating', `Deployment ${name} is rolling out at size ${s.size}`]
        : ['Complete', message];

  let conditions = current.conditions ?? [];
  conditions = setCondition(conditions, condition('Available', available, reason, message, now, generation));
  conditions = setCondition(
    conditions,
    condition('Progressing', progressing, progressReason, progressMessage, now, generation),
  );
  // A message even when all is well: `kubectl describe` shows it beside the reason.
  conditions = setCondition(
    conditions,
    condition('Degraded', false, 'AsExpected', 'No failure observed', now, generation),
  );
  return withoutEmpty({ conditions, nodes });
}

/**
 * The seed's finalizer flow: say it on the status (`Degraded`, reason `Finalizing`), emit
 * an Event, and let the host remove the finalizer. The Deployment goes with the Memcached
 * through its owner reference.
 */
function finalize(input: Input, current: MemcachedStatus): Action[] {
  const { name, namespace, generation } = input.parent.meta;
  const message = `Performing finalizer operations for the custom resource: ${name}`;
  const next = withoutEmpty({
    ...current,
    conditions: setCondition(
      current.conditions ?? [],
      condition('Degraded', true, 'Finalizing', message, input.now, generation),
    ),
  });
  return [
    ...updateFrom(next, current),
    event('warning', 'Deleting', `Custom Resource ${name} is being deleted from the namespace ${namespace}`),
    finalizeDone(),
  ];
}
