// Print Windmill's own signature inference (windmill-parser-wasm-py) for each Python file given.
// Usage: node parse_sig.mjs <node_modules dir> file.py [file.py…] → {"file.py": signature, …}
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const [modules, ...files] = process.argv.slice(2);
const pkg = join(modules, 'windmill-parser-wasm-py');
const { initSync, parse_python } = await import(pathToFileURL(join(pkg, 'windmill_parser_wasm.js')).href);
initSync({ module: readFileSync(join(pkg, 'windmill_parser_wasm_bg.wasm')) });
const out = {};
for (const f of files) out[f] = JSON.parse(parse_python(readFileSync(f, 'utf8'), null));
console.log(JSON.stringify(out));
