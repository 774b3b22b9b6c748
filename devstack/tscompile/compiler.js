// Long-lived TypeScript compiler child of devstack.tscompile (contracts.md §C.5–§C.6).
// Protocol: one JSON object per line on stdin {"n", "scripts": [{id, source}]}; one JSON line
// per request on stdout: {"n", "outputs": {id: js}} or {"n", "diagnostics": [...]} or
// {"n", "error": "..."}. The first stdout line is {"ready": true, "typescript": ts.version}.
// All scripts plus /src/host.d.ts form ONE program (global scripts share one page scope).
// Options are §C.5's plus skipDefaultLibCheck: TypeScript's own lib files (lib.es2023, lib.dom)
// are not re-checked on every request. That is the one deliberate difference from the real
// service: it saves ~1.5 s of CPU per compile (30x) and changes neither the emitted bytes nor the
// 200/422 outcome; the only diagnostics it drops are duplicates located INSIDE lib.dom.d.ts (e.g.
// the lib side of a TS2451 whose script side is still reported). host.d.ts is still checked.
'use strict';
const fs = require('fs');
const path = require('path');
const readline = require('readline');
const ts = require('typescript');

const HOST_DTS = fs.readFileSync(path.join(__dirname, 'host.d.ts'), 'utf8');
const OPTIONS = {
  target: ts.ScriptTarget.ES2023,
  module: ts.ModuleKind.ESNext,
  lib: ['lib.es2023.d.ts', 'lib.dom.d.ts'],
  types: [],
  strict: true,
  erasableSyntaxOnly: true,
  removeComments: false,
  newLine: ts.NewLineKind.LineFeed,
  skipDefaultLibCheck: true,
};

// Parsed lib files are reused across requests: they dominate the cost of a program.
const libCache = new Map();

function toDiagnostic(d) {
  const out = {};
  if (d.file) out.file = d.file.fileName.replace(/^\/src\//, '');
  if (d.file && d.start !== undefined) {
    const pos = d.file.getLineAndCharacterOfPosition(d.start);
    out.line = pos.line + 1;
    out.col = pos.character + 1;
  }
  out.code = 'TS' + d.code;
  out.message = ts.flattenDiagnosticMessageText(d.messageText, '\n');
  return out;
}

function compile(scripts) {
  const files = new Map();
  for (const s of scripts) files.set(`/src/${s.id}.ts`, s.source);
  files.set('/src/host.d.ts', HOST_DTS);
  const written = new Map();
  const host = ts.createCompilerHost(OPTIONS, true);
  const realGet = host.getSourceFile.bind(host);
  const realExists = host.fileExists.bind(host);
  const realRead = host.readFile.bind(host);
  host.getSourceFile = (name, lang, onError) => {
    const text = files.get(name);
    if (text !== undefined) return ts.createSourceFile(name, text, lang, true);
    const key = name + '|' + JSON.stringify(lang);
    if (!libCache.has(key)) libCache.set(key, realGet(name, lang, onError));
    return libCache.get(key);
  };
  host.fileExists = (name) => files.has(name) || realExists(name);
  host.readFile = (name) => (files.has(name) ? files.get(name) : realRead(name));
  host.writeFile = (name, text) => written.set(name, text);
  host.getCurrentDirectory = () => '/src';
  const program = ts.createProgram([...files.keys()], OPTIONS, host);
  const diagnostics = ts.getPreEmitDiagnostics(program).map(toDiagnostic);
  if (diagnostics.length > 0) return { diagnostics };
  program.emit();
  const outputs = {};
  for (const s of scripts) {
    const js = written.get(`/src/${s.id}.js`);
    if (js === undefined) throw new Error(`no output for ${s.id}`);
    outputs[s.id] = js;
  }
  return { outputs };
}

process.stdout.write(JSON.stringify({ ready: true, typescript: ts.version }) + '\n');
const rl = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on('line', (line) => {
  let n = null;
  try {
    const req = JSON.parse(line);
    n = req.n;
    process.stdout.write(JSON.stringify({ n, ...compile(req.scripts) }) + '\n');
  } catch (err) {
    process.stdout.write(JSON.stringify({ n, error: String((err && err.stack) || err) }) + '\n');
  }
});
rl.on('close', () => process.exit(0));
