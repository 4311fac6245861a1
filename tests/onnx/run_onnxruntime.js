#!/usr/bin/env node
// Runs the ONNX test cases of a manifest (tests/onnx/onnx_cases.h writes them) in ONNX Runtime
// (the npm package onnxruntime-node, CPU, one thread) and compares every output with the one
// depthgrad computed. It only reads: it never writes a file.
//
//   node tests/onnx/run_onnxruntime.js [--ort-dir DIR] [--optimization LEVEL] MANIFEST.json [CASE...]
//
// --ort-dir DIR: the folder the package was installed into (DIR/node_modules/onnxruntime-node,
// as tools/onnx/install_onnxruntime.sh DIR does); without it, node's own lookup (NODE_PATH).
// --optimization LEVEL: ONNX Runtime's graph optimisation, all (its default, what a user gets),
// extended, basic or disabled (the graph as written: to tell a fusion's rounding from a wrong op).
// CASE...: run only the cases of these names.
//
// The rule: an output value a matches the expected b when |a - b| <= tolerance * max(1, |b|)
// (the case's relative tolerance; NaN matches only NaN, an infinity only itself); integer and
// bool outputs must be equal. An output's dtype and shape must be the expected ones. The error
// printed is the largest |a - b| / max(1, |b|) over every output value of every run of the case.
//
// Prints one line per case (PASS or FAIL, its name, runs, the largest error) with the worst
// value's place under a FAIL, then "N passed, M failed". Exit: 0 when every case passes, 1 when
// one fails, 2 for a bad command line or manifest, 77 when onnxruntime-node cannot be found.
'use strict';
const fs = require('fs');
const path = require('path');

const SKIP = 77;

function usage(message) {
  process.stderr.write(`run_onnxruntime: ${message}\n` +
    'usage: node run_onnxruntime.js [--ort-dir DIR] [--optimization LEVEL] MANIFEST.json [CASE...]\n');
  process.exit(2);
}

// A manifest that cannot be run: one line, exit 2.
function refuse(message) {
  process.stderr.write(`run_onnxruntime: ${message}\n`);
  process.exit(2);
}

function parseArgs(argv) {
  const args = { ortDir: null, optimization: 'all', manifest: null, only: [] };
  const levels = ['all', 'extended', 'basic', 'disabled'];
  for (let i = 0; i < argv.length; ++i) {
    if (argv[i] === '--ort-dir') {
      if (i + 1 >= argv.length) usage('--ort-dir needs a folder');
      args.ortDir = argv[++i];
    } else if (argv[i] === '--optimization') {
      if (i + 1 >= argv.length || !levels.includes(argv[i + 1])) {
        usage(`--optimization takes one of ${levels.join(', ')}`);
      }
      args.optimization = argv[++i];
    } else if (argv[i].startsWith('--')) {
      usage(`unknown option ${argv[i]}`);
    } else if (args.manifest === null) {
      args.manifest = argv[i];
    } else {
      args.only.push(argv[i]);
    }
  }
  if (args.manifest === null) usage('no manifest given');
  return args;
}

// The onnxruntime-node module, or exit 77 with what to do when it is not installed.
function loadOrt(ortDir) {
  const where = ortDir ? path.resolve(ortDir, 'node_modules', 'onnxruntime-node') : 'onnxruntime-node';
  try {
    return require(where);
  } catch (e) {
    if (e.code === 'MODULE_NOT_FOUND' && e.message.includes('onnxruntime-node')) {
      process.stdout.write(`SKIPPED: onnxruntime-node not found (${where}); install it with ` +
        `tools/onnx/install_onnxruntime.sh ${ortDir || 'DIR'} (make test does)\n`);
      process.exit(SKIP);
    }
    process.stderr.write(`run_onnxruntime: onnxruntime-node is there but does not load: ${e.message}\n`);
    process.exit(2);
  }
}

// The TypedArray class of each dtype of the case files (bool: one byte, 0 or 1).
const ARRAYS = {
  float32: Float32Array, float64: Float64Array, int32: Int32Array, int64: BigInt64Array,
  uint8: Uint8Array, bool: Uint8Array,
};

// One tensor entry of a run: a name, a dtype of ARRAYS, a shape of sizes >= 0, a file.
function checkTensorEntry(where, t) {
  const ok = t !== null && typeof t === 'object' && typeof t.name === 'string' && t.name !== '' &&
    Object.hasOwn(ARRAYS, t.dtype) && Array.isArray(t.shape) &&
    t.shape.every((d) => Number.isInteger(d) && d >= 0) && typeof t.file === 'string' && t.file !== '';
  if (!ok) {
    refuse(`${where}: needs "name", "dtype" (${Object.keys(ARRAYS).join(', ')}), ` +
      `"shape" (sizes >= 0) and "file"`);
  }
}

// Every case names its model, a positive tolerance and at least one run with an output.
function checkCase(where, c) {
  if (c === null || typeof c !== 'object') refuse(`${where} is not an object`);
  if (typeof c.name !== 'string' || c.name === '') refuse(`${where}: "name" must be a text`);
  where = `${where} ('${c.name}')`;
  if (typeof c.model !== 'string' || c.model === '') refuse(`${where}: "model" must be a file name`);
  if (typeof c.tolerance !== 'number' || !(c.tolerance > 0)) {
    refuse(`${where}: "tolerance" must be a positive number`);
  }
  if (!Array.isArray(c.runs) || c.runs.length === 0) refuse(`${where}: "runs" must be a list of runs`);
  c.runs.forEach((run, r) => {
    for (const side of ['inputs', 'outputs']) {
      if (run === null || typeof run !== 'object' || !Array.isArray(run[side])) {
        refuse(`${where} run ${r}: "${side}" must be a list`);
      }
      run[side].forEach((t, k) => checkTensorEntry(`${where} run ${r} ${side} ${k}`, t));
    }
    if (run.outputs.length === 0) refuse(`${where} run ${r}: no outputs to compare`);
  });
}

function readManifest(file) {
  let manifest;
  try {
    manifest = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    refuse(`${file}: ${e.message}`);
  }
  if (manifest === null || manifest.format !== 'depthgrad-onnx-cases' || !Array.isArray(manifest.cases)) {
    refuse(`${file}: not a manifest of ONNX cases (format "depthgrad-onnx-cases" with a "cases" list)`);
  }
  manifest.cases.forEach((c, i) => checkCase(`${file}: case ${i}`, c));
  return manifest;
}

// A tensor entry of the manifest read from its file into a TypedArray (a copy: aligned).
function readValues(dir, entry) {
  const Array = ARRAYS[entry.dtype];
  if (!Array) throw new Error(`'${entry.name}' has dtype '${entry.dtype}', not one of ${Object.keys(ARRAYS)}`);
  const bytes = fs.readFileSync(path.join(dir, entry.file));
  const count = entry.shape.reduce((a, b) => a * b, 1);
  if (bytes.length !== count * Array.BYTES_PER_ELEMENT) {
    throw new Error(`${entry.file}: ${bytes.length} bytes, but '${entry.name}' ` +
      `[${entry.shape}] ${entry.dtype} needs ${count * Array.BYTES_PER_ELEMENT}`);
  }
  const copy = new Uint8Array(bytes.length);
  copy.set(bytes);
  return new Array(copy.buffer);
}

// The scaled error of one value: |a - b| / max(1, |b|); 0 for equal values (NaN with NaN, an
// infinity with itself), Infinity when only one is NaN or infinite.
function valueError(a, b) {
  if (typeof a === 'bigint') return a === b ? 0 : Number(a > b ? a - b : b - a) / Math.max(1, Math.abs(Number(b)));
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b) ? 0 : Infinity;
  if (a === b) return 0;
  return Math.abs(a - b) / Math.max(1, Math.abs(b));
}

// Compares one output; returns {error, detail} (detail: the worst value's place, or what is wrong).
function compareOutput(got, expected, entry) {
  const where = `output '${entry.name}'`;
  if (!got) return { error: Infinity, detail: `${where}: the model gives no such output` };
  if (got.type !== entry.dtype) return { error: Infinity, detail: `${where}: dtype ${got.type}, expected ${entry.dtype}` };
  if (got.dims.join(',') !== entry.shape.join(',')) {
    return { error: Infinity, detail: `${where}: shape [${got.dims}], expected [${entry.shape}]` };
  }
  let worst = 0;
  let worstAt = -1;
  for (let i = 0; i < expected.length; ++i) {
    const e = valueError(got.data[i], expected[i]);
    if (e > worst || (worstAt < 0 && e === worst)) {
      worst = e;
      worstAt = i;
    }
  }
  const detail = worstAt < 0 ? `${where}: empty` :
    `${where} [${entry.shape}] ${entry.dtype}: worst at flat index ${worstAt}: ` +
    `got ${got.data[worstAt]}, expected ${expected[worstAt]}`;
  return { error: worst, detail };
}

// Runs every run of one case; returns {error, details, failed}. Integer and bool outputs must be
// equal (tolerance 0).
async function runCase(ort, dir, c, optimization) {
  const inference = await ort.InferenceSession.create(path.join(dir, c.model), {
    intraOpNumThreads: 1, interOpNumThreads: 1, executionProviders: ['cpu'],
    graphOptimizationLevel: optimization,
  });
  const result = { error: 0, details: [], failed: false };
  try {
    for (const [r, run] of c.runs.entries()) {
      const feeds = {};
      for (const input of run.inputs) {
        if (!inference.inputNames.includes(input.name)) {
          throw new Error(`run ${r}: input '${input.name}' is not one of the model's [${inference.inputNames}]`);
        }
        feeds[input.name] = new ort.Tensor(input.dtype, readValues(dir, input), input.shape);
      }
      const outputs = await inference.run(feeds);
      for (const entry of run.outputs) {
        const { error, detail } = compareOutput(outputs[entry.name], readValues(dir, entry), entry);
        const tolerance = entry.dtype.startsWith('float') ? c.tolerance : 0;
        result.error = Math.max(result.error, error);
        if (!(error <= tolerance)) {
          result.failed = true;
          result.details.push(`run ${r} ${detail}`);
        }
      }
    }
  } finally {
    await inference.release();
  }
  return result;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const manifest = readManifest(args.manifest);
  const dir = path.dirname(args.manifest);
  const ort = loadOrt(args.ortDir);
  const cases = manifest.cases.filter((c) => args.only.length === 0 || args.only.includes(c.name));
  for (const name of args.only) {
    if (!manifest.cases.some((c) => c.name === name)) refuse(`${args.manifest} has no case '${name}'`);
  }
  let passed = 0;
  let failed = 0;
  const width = Math.max(...cases.map((c) => c.name.length), 4);
  for (const c of cases) {
    let result;
    try {
      result = await runCase(ort, dir, c, args.optimization);
    } catch (e) {
      result = { error: Infinity, failed: true, details: [String(e.message).split('\n')[0]] };
    }
    const verdict = result.failed ? 'FAIL' : 'PASS';
    process.stdout.write(`${verdict}  ${c.name.padEnd(width)}  runs ${c.runs.length}  ` +
      `max error ${result.error.toExponential(2)}  (tolerance ${c.tolerance})\n`);
    for (const d of result.details) process.stdout.write(`      ${d}\n`);
    if (result.failed) ++failed; else ++passed;
  }
  const version = ort.env && ort.env.versions ? ort.env.versions.common : 'version unknown';
  process.stdout.write(`onnxruntime-node ${version}\nrun_onnxruntime: ${passed} passed, ${failed} failed\n`);
  process.exit(failed === 0 && cases.length > 0 ? 0 : 1);
}

main().catch((e) => {
  process.stderr.write(`run_onnxruntime: ${e.stack || e}\n`);
  process.exit(2);
});
