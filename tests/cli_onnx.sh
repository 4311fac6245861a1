#!/usr/bin/env bash
# `depthgrad onnx-check` end to end: a model exported by torch.onnx.export (tests/data/onnx_cli/,
# written by tools/torch_goldens_onnx_cli.py) described in full (inputs and outputs with the
# dynamic axis by name, opset, producer, op counts, initializers and parameters, its wiring
# checked), and files that are not ONNX models or are miswired each refused in one line with
# exit 1, usage mistakes with exit 2.
# Usage: tests/cli_onnx.sh PATH/TO/depthgrad   (ctest runs it; it needs no data folder)
set -u
# cli_common.sh's second argument is a data folder, which these checks do not read.
source "$(dirname "$0")/cli_common.sh" cli_onnx "$1" "(not needed)"
MODEL="$(dirname "$0")/data/onnx_cli/mlp_torch.onnx"

# --- a torch.onnx.export file, described ---
out="$("$BIN" onnx-check "$MODEL" 2> "$WORK/err")"
rc=$?
echo "$out"
if [ $rc -eq 0 ] && [ ! -s "$WORK/err" ]; then pass "onnx-check exits 0, nothing on stderr"; else fail "onnx-check exit $rc: $(cat "$WORK/err")"; fi
want() {  # want NAME REGEX: a line of the output matches REGEX
  if printf '%s\n' "$out" | grep -qE -- "$2"; then pass "$1"; else fail "$1 (no line matching '$2')"; fi
}
want "IR version and opset" ": ONNX IR version 8, opset 17$"
want "operator sets" "^opsets: ai.onnx 17$"
want "producer" "^producer: pytorch 1.13.0$"
want "one input, named, with the dynamic batch axis by name" "^inputs \(1\):$"
want "the input's type and shape" "^  features +float32 +\[batch, 4\]$"
want "the output's type and shape" "^  probabilities +float32 +\[batch, 3\]$"
want "op count header" "^ops \(3 types, 4 nodes\):$"
want "Gemm counted twice" "^  Gemm +2$"
want "Relu once" "^  Relu +1$"
want "Softmax once" "^  Softmax +1$"
if printf '%s\n' "$out" | grep -A3 '^ops' | tail -3 | awk '{print $1}' | sort -c 2> /dev/null; then
  pass "ops sorted by type"
else
  fail "ops not sorted by type"
fi
want "initializers and parameters (4·8 + 8 + 8·3 + 3)" "^initializers: 4 \(67 parameters\)$"
want "the wiring checked" "^wiring: ok "

# --- miswired graphs (written by onnx.helper, unchecked): one line naming the node and tensor ---
D="$(dirname "$0")/data/onnx_cli"
expect "a node reading a tensor nothing makes" 1 "reads_undefined.onnx: node 0 (Add 'add') reads 'nowhere', which no graph input, initializer or earlier node makes" -- "$BIN" onnx-check "$D/reads_undefined.onnx"
expect "a tensor made twice" 1 "made_twice.onnx: tensor 'y' is made twice, by node 0 (Relu 'first') and by node 1 (Neg 'second')" -- "$BIN" onnx-check "$D/made_twice.onnx"
expect "a graph output nothing makes" 1 "output_unmade.onnx: graph output 'z' is made by no node, graph input or initializer" -- "$BIN" onnx-check "$D/output_unmade.onnx"

# --- files that are not ONNX models: one line, exit 1, naming the file ---
: > "$WORK/empty.onnx"
expect "an empty file" 1 "empty.onnx: not an ONNX model: it has no graph" -- "$BIN" onnx-check "$WORK/empty.onnx"
head -c 300 "$MODEL" > "$WORK/truncated.onnx"
expect "a truncated file" 1 "truncated.onnx" -- "$BIN" onnx-check "$WORK/truncated.onnx"
printf 'name,value\nx,1\n' > "$WORK/table.csv"
expect "a CSV file" 1 "table.csv" -- "$BIN" onnx-check "$WORK/table.csv"
printf '\x3a\x00' > "$WORK/no-ir.onnx"  # field 7 (graph), empty: a graph but no ir_version
expect "a graph without ir_version" 1 "no-ir.onnx: not an ONNX model: ir_version (ModelProto field 1) is 0" -- "$BIN" onnx-check "$WORK/no-ir.onnx"
expect "a missing file" 1 "$WORK/missing.onnx" -- "$BIN" onnx-check "$WORK/missing.onnx"
expect "a directory" 1 "it is a directory" -- "$BIN" onnx-check "$WORK"

# --- usage mistakes: exit 2 ---
expect "no file" 2 "give the ONNX file: depthgrad onnx-check FILE" -- "$BIN" onnx-check
expect "two files" 2 "one file at a time" -- "$BIN" onnx-check "$MODEL" "$MODEL"
expect "an unknown flag" 2 "unknown flag --json" -- "$BIN" onnx-check --json "$MODEL"
if "$BIN" onnx-check --help | grep -q '^usage: depthgrad onnx-check FILE'; then pass "onnx-check --help"; else fail "onnx-check --help"; fi
if "$BIN" --help | grep -qE '^  onnx-check +print'; then pass "depthgrad --help lists onnx-check"; else fail "depthgrad --help does not list onnx-check"; fi
finish
