// Generates the TypeScript types of the contract from wit/policy.wit (the single source
// of truth) into src/generated/: `node typescript/policy-sdk/generate.mjs [OUT_DIR]`. `make
// check` regenerates them into a temporary directory and fails on any difference.
//
// The WIT is passed as source text: jco 1.35's path-based `guest-types` fails here to
// read any path ("os error 44" from its WASI file system shim).

import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createRequire } from 'node:module';

const here = dirname(fileURLToPath(import.meta.url));
const out = process.argv[2] ?? join(here, 'src/generated');
const source = readFileSync(join(here, '../../wit/policy.wit'), 'utf8');
const contract = /^package podset:policy@([0-9.]+);/m.exec(source)?.[1];
if (!contract) throw new Error('wit/policy.wit names no `package podset:policy@VERSION;`');

// The bindings generator is a component inside jco-transpile, not one of its exports.
const require = createRequire(import.meta.url);
let transpile = dirname(require.resolve('@bytecodealliance/jco-transpile'));
while (!existsSync(join(transpile, 'package.json'))) transpile = dirname(transpile);
const bindgen = await import(join(transpile, 'vendor/js-component-bindgen-component.js'));
await bindgen.$init;

const header = '// Generated from wit/policy.wit by typescript/policy-sdk/generate.mjs: do not edit.\n';
// Both worlds: each names its file (`policy.d.ts`, the any-kind world's;
// `podset-policy.d.ts`) and its interfaces' (shared ones are the same text either way).
for (const [name, world] of [['policy', 'reconcile-policy'], ['podset-policy', 'podset-policy']]) {
  const files = bindgen.generateTypes(name, {
    wit: { tag: 'source', val: source },
    world,
    guest: true,
    features: { tag: 'list', val: [] },
  });
  for (const [file, bytes] of files) {
    const path = join(out, file);
    mkdirSync(dirname(path), { recursive: true });
    writeFileSync(path, header + new TextDecoder().decode(bytes));
  }
}
writeFileSync(
  join(out, 'contract.ts'),
  `${header}\n/** The version of the contract (wit/policy.wit's package) these types are of. */\nexport const CONTRACT = '${contract}';\n`,
);
