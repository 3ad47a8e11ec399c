// Bundles a TypeScript policy's component entry (with the SDK and anything it imports)
// into the one JavaScript file `jco componentize` takes, and prints its world:
// `node typescript/policy-sdk/bundle.mjs ENTRY.ts OUT.js`. The contract's modules
// (`podset:policy/…`) stay imports, which jco binds to the component's. With `--node`,
// a native test file for `node --test` instead (`node:` modules stay imports).

import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'rolldown';

// The SDK is this one, wherever the policy is (a package made outside the repository
// has no node_modules of its own).
const sdk = dirname(fileURLToPath(import.meta.url));
const modules = {
  '@podset/policy-sdk': join(sdk, 'src/index.ts'),
  '@podset/policy-sdk/podset': join(sdk, 'src/podset.ts'),
  '@podset/policy-sdk/testing': join(sdk, 'src/testing.ts'),
};
const thisSdk = { name: 'podset-policy-sdk', resolveId: (id) => modules[id] ?? null };

const args = process.argv.slice(2);
const native = args[0] === '--node';
const [entry, file] = native ? args.slice(1) : args;
if (!entry || !file) throw new Error('usage: node typescript/policy-sdk/bundle.mjs [--node] ENTRY.ts OUT.js');
const { output } = await build({
  input: entry,
  external: /^podset:policy\//,
  plugins: [thisSdk],
  platform: native ? 'node' : 'neutral',
  logLevel: 'warn',
  output: { file, format: 'esm' },
});
// A component's world is the one its entry's exports serve (`servePodSet`'s `podset`, or
// `serve`'s `reconciler`): printed for `jco componentize -n`.
if (!native) console.log(output[0].exports.includes('podset') ? 'podset-policy' : 'reconcile-policy');
