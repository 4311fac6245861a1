// Runs an ONNX model in ONNX Runtime (onnxruntime-node) for tools/onnx_op_cases.py: reads
// {"model": path, "inputs": {name: {"dims": [...], "type": "float32"|"int64", "data": [...]}}}
// as JSON on stdin and prints {name: {"dims": [...], "data": [...]}} for every output.
// onnxruntime-node is found through NODE_PATH (see tools/README.md, "ONNX").
const ort = require("onnxruntime-node");

async function main() {
  let text = "";
  for await (const chunk of process.stdin) text += chunk;
  const request = JSON.parse(text);
  const runner = await ort.InferenceSession.create(request.model);
  const feeds = {};
  for (const [name, t] of Object.entries(request.inputs)) {
    const data = t.type === "int64" ? BigInt64Array.from(t.data.map(BigInt))
                                    : Float32Array.from(t.data);
    feeds[name] = new ort.Tensor(t.type, data, t.dims);
  }
  const results = await runner.run(feeds);
  const out = {};
  for (const name of runner.outputNames) {
    const r = results[name];
    out[name] = {dims: r.dims, data: Array.from(r.data, (v) => Number(v))};
  }
  process.stdout.write(JSON.stringify(out));
}
main().catch((e) => {
  console.error(e);
  process.exit(1);
});
