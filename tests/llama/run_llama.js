#!/usr/bin/env node
// Loads a GGUF file in llama.cpp (the npm package @fugood/llama.node, CPU, one thread), optionally
// with LoRA adapter GGUF files applied at scale 1, and prints its greedy continuation of a prompt
// as one line of JSON. It only reads: it never writes a file. The ctest case
// tests/llama/llama_cpp_client.sh compares what it prints with `depthgrad generate`.
//
//   node tests/llama/run_llama.js [--llama-dir DIR] [--lora FILE]... --tokens N MODEL.gguf PROMPT
//
// --llama-dir DIR: the folder the package was installed into (DIR/node_modules/@fugood/llama.node,
// as tools/llama/install_llama_node.sh DIR does); without it, node's own lookup (NODE_PATH).
// --lora FILE: an adapter GGUF (general.type "adapter"), applied with llama.cpp's scale
// alpha / rank times 1; may be given more than once.
// --tokens N: tokens to generate (ignore_eos, so exactly N unless the context fills).
//
// Greedy: temperature 0 and top_k 1 (the top-k sampler keeps the single most likely token, so
// the final `dist` sampler has one choice), and every sampler that could move a logit is turned
// off: repetition penalties (penalty_last_n 0, penalty_repeat 1), DRY (dry_multiplier 0; the
// package's default is 1.75), XTC (xtc_probability 0; default 0.1), mirostat 0, typical_p 1,
// top_p 1, min_p 0. The prompt is tokenized as is: no BOS/EOS (the depthgrad export sets
// tokenizer.ggml.add_bos_token false) and no chat template.
//
// Prints {"text": ..., "pieces": [...], "prompt_tokens": [...], "tokens_predicted": n}:
// the continuation (not the prompt), the text of each generated token as llama.cpp streamed it
// (the package reports no token ids for generated tokens; a token that ends inside a UTF-8
// character is held back and streamed with the next), and the prompt's token ids. The package
// cuts "text" at a NUL byte (it passes a C string); the pieces joined are the whole continuation.
// tokens_predicted is the package's count, which leaves out the first generated token.
// Exit: 0 on success, 1 when llama.cpp fails to load or run, 2 for a bad command line,
// 77 when @fugood/llama.node cannot be found.
'use strict';
const path = require('path');

const SKIP = 77;

function usage(message) {
  process.stderr.write(`run_llama: ${message}\n` +
    'usage: node run_llama.js [--llama-dir DIR] [--lora FILE]... --tokens N MODEL.gguf PROMPT\n');
  process.exit(2);
}

function parseArgs(argv) {
  const args = { llamaDir: null, loras: [], tokens: null, model: null, prompt: null };
  for (let i = 0; i < argv.length; ++i) {
    const needsValue = ['--llama-dir', '--lora', '--tokens'];
    if (needsValue.includes(argv[i]) && i + 1 >= argv.length) usage(`${argv[i]} needs a value`);
    if (argv[i] === '--llama-dir') {
      args.llamaDir = argv[++i];
    } else if (argv[i] === '--lora') {
      args.loras.push(argv[++i]);
    } else if (argv[i] === '--tokens') {
      const n = Number(argv[++i]);
      if (!Number.isInteger(n) || n < 1) usage(`--tokens takes a positive integer, got ${argv[i]}`);
      args.tokens = n;
    } else if (argv[i].startsWith('--')) {
      usage(`unknown option ${argv[i]}`);
    } else if (args.model === null) {
      args.model = argv[i];
    } else if (args.prompt === null) {
      args.prompt = argv[i];
    } else {
      usage(`unexpected argument ${argv[i]}`);
    }
  }
  if (args.model === null || args.prompt === null) usage('give MODEL.gguf and PROMPT');
  if (args.tokens === null) usage('--tokens is required');
  return args;
}

function loadPackage(llamaDir) {
  const name = '@fugood/llama.node';
  try {
    return llamaDir ? require(path.resolve(llamaDir, 'node_modules', name)) : require(name);
  } catch (e) {
    process.stderr.write(`run_llama: cannot load ${name}` +
      `${llamaDir ? ` from ${llamaDir}/node_modules` : ''}: ${e.message.split('\n')[0]}\n` +
      'install it with tools/llama/install_llama_node.sh DIR\n');
    process.exit(SKIP);
  }
}

// The sampling options that make llama.cpp's completion an argmax (see the header).
function greedyOptions(prompt, tokens) {
  return {
    prompt,
    n_predict: tokens,
    ignore_eos: true,
    temperature: 0,
    top_k: 1,
    top_p: 1,
    min_p: 0,
    typical_p: 1,
    mirostat: 0,
    penalty_last_n: 0,
    penalty_repeat: 1,
    penalty_freq: 0,
    penalty_present: 0,
    dry_multiplier: 0,
    xtc_probability: 0,
    top_n_sigma: -1,
    seed: 0,
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const llama = loadPackage(args.llamaDir);
  // llama.cpp logs every load to stderr; keep its lines out of the JSON on stdout.
  if (llama.toggleNativeLog) await llama.toggleNativeLog(false);
  const context = await llama.loadModel({
    model: path.resolve(args.model),
    n_ctx: 64,
    n_batch: 64,
    n_threads: 1,
    n_gpu_layers: 0,
    use_mmap: false,
    lora_list: args.loras.map((file) => ({ path: path.resolve(file), scaled: 1.0 })),
  });
  const prompt = await context.tokenize(args.prompt);
  const pieces = [];
  const result = await context.completion(greedyOptions(args.prompt, args.tokens),
    (data) => { pieces.push(data.token); });
  // The package delivers the streamed pieces through the event loop, and the completion can
  // resolve before the last of them arrive: wait (up to 5 s) until every generated token's piece
  // is in (tokens_predicted leaves out the first token).
  for (let waited = 0; pieces.length < result.tokens_predicted + 1 && waited < 5000; waited += 10)
    await new Promise((resolve) => setTimeout(resolve, 10));
  process.stdout.write(JSON.stringify({
    text: result.text,
    pieces,
    prompt_tokens: Array.from(prompt.tokens),
    tokens_predicted: result.tokens_predicted,
  }) + '\n');
  await context.release();
}

main().catch((e) => {
  process.stderr.write(`run_llama: llama.cpp failed: ${e && e.message ? e.message : e}\n`);
  process.exit(1);
});
