// Bundles a TypeScript policy's component entry (with the SDK and anything it imports)
// into the one JavaScript file `jco componentize` takes:
// `node typescript/policy-sdk/bundle.mjs ENTRY.ts OUT.js`. The contract's modules
// (`podset:policy/…`) stay imports, which jco binds to the component's. With `--node`,
// a native test file for `node --test` instead (`node:` modules stay imports).

import { build } from 'rolldown';

const args = process.argv.slice(2);
const native = args[0] === '--node';
const [entry, file] = native ? args.slice(1) : args;
if (!entry || !file) throw new Error('usage: node typescript/policy-sdk/bundle.mjs [--node] ENTRY.ts OUT.js');
await build({
  input: entry,
  external: /^podset:policy\//,
  platform: native ? 'node' : 'neutral',
  logLevel: 'warn',
  output: { file, format: 'esm' },
});
