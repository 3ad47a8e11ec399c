// The component's entry: the only file that imports the contract's modules.
import { log } from 'podset:policy/log@0.4.0';
import { servePodSet } from '@podset/policy-sdk/podset';
import { policy } from './policy.ts';

export const { identity, podset } = servePodSet(policy, log);
