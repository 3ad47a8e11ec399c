// The component's entry: the only file that imports the contract's modules.
import { log } from 'podset:policy/log@0.4.0';
import { serve } from '@podset/policy-sdk';
import { policy } from './policy.ts';

export const { identity, reconciler } = serve(policy, log);
