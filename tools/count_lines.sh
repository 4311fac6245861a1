#!/usr/bin/env bash
# Counts the lines of C++ per folder (code lines: not blank, not comment-only; and all lines),
# and checks the core (tensor/ + autograd/ + nn/) against its budget, stated in this script.
# Generated files (first line says GENERATED) are left out. Reads git's tracked files.
# Usage: tools/count_lines.sh [REV]   (REV: count a commit instead of the work tree; no budget check)
set -euo pipefail
cd "$(dirname "$0")/.."
CORE_BUDGET=20970  # the line budget: code lines of tensor/ + autograd/ + nn/ (stated here only).
# Raised from 8,000 when the op set a user builds models with (about forty ops, the graph, init,
# containers) took the core from 6.9k to 9.4k lines, and from 10,500 when the graph's guards
# (version checks, a second, recorded backward for every op that has one, tensor and module
# hooks, anomaly mode) took it to 10.5k, and to 12,000 when the first op families beyond the
# transformer (convolution and pooling with their im2col kernels and references, the elementary
# ops, cumsum) took it to 11.7k, and to 14,500 when the layers beyond the transformer (batch and
# group norm, masked attention, the recurrent cells, each with its kernels and references, and
# their torch.nn modules: vision layers, RNN/LSTM/GRU, MultiheadAttention and the encoder) took it
# to 14.0k, and to 17,500 when the pieces a PyTorch program translated line by line needs (bool and
# uint8 dtypes with torch's masks, recorded Tensor methods and module(x), pad/sort/topk/var/flip/
# roll/tril/triu/one_hot, interpolate, the KL/Huber/cosine losses, randperm/multinomial, indexing
# and index_put, module repr and to(dtype), packed sequences) took it to 17.3k, and to 17,650 when
# the longest functions were split into named steps (each step's signature and the struct its
# steps share) and the two largest op files by family (each new file's includes), and to 17,750
# when the tape's core was parted from its extensions (the declarations the sibling files share,
# in tape_internal.h), and to 18,100 when float32 convolutions gained oneDNN's direct kernels
# beside the im2col ones (primitives, layout reorders and chunks of images in
# kernels_conv_onednn.cpp) and the vectorised 2×2 max pool, and to 18,850 when an LSTM or GRU
# layer's recurrence became one op (lstm_sequence, gru_sequence: whole-sequence kernels, forward
# and backward, beside their references), and to 19,150 when batch norm and ReLU became one
# fused op beside the pair (batch_norm_relu, its kernels' relu variants and Sequential's use of
# it), max pooling got its own backward kernel and an AVX-512 2×2 path, convolution's two
# gradients one pass (conv2d_backward) and fuse_conv_bn_eval came in, and to 19,250 when the
# weight gradient of small images became one GEMM over the batch and oneDNN's Winograd kernels
# were chosen for the convolutions they speed up, and to 19,450 when a recurrent layer's W_hh came
# to be packed once per sequence for its steps' GEMMs (gemm_packed: float32 and bf16 microkernels
# over panels), and to 19,700 when every op came to trace itself for the ONNX exporter (the op trace,
# autograd/op_trace.h, and one call in each op saying its name, tensor arguments and settings),
# and to 19,960 when LoRA adapters came in (nn/lora.cpp: PEFT's target matching, a shared A, merge
# and unmerge; the adapter's state and forward in Linear; frozen parameters kept out of the flat
# buffers), and to 20,610 when a frozen weight came to be stored in bf16 or int8
# (tensor/quantized_matrix.h: quantising, the panel GEMMs and the GEMV that dequantise inside the
# kernel, their references; the quantized_linear op and its gradient-check rows; nn/quantize.h),
# and to 20,660 when bf16 convolutions got their own choices (float32 Winograd on large images, the
# small images' weight gradient per block of output channels over the whole batch), and to 20,970
# when the CNN step's serial parts went to both threads (dropout's mask built over the threads,
# batch norm's and max pooling's input gradients written whole without a serial zero-fill, the
# conv weight gradient's chunk sums by blocks of weights, deeper GEMMs cut in smaller pieces) and
# the encoder layer's step lost its copies and passes (packed_self_attention on the one
# in-projection, the attention kernels writing strided heads and keeping the probabilities,
# linear_relu, the K-cut weight-gradient GEMM): growth past it is a decision, not a drift.
rev="${1:-}"

list_files() {  # tracked .h/.cpp files under $1 (not in its sub-folders when $2 = top)
  if [ -n "$rev" ]; then git ls-tree -r --name-only "$rev" -- "$1"; else git ls-files -- "$1"; fi |
    grep -E '\.(cpp|h)$' | { if [ "${2:-}" = top ]; then grep -E "^$1/[^/]+$"; else cat; fi; } || true
}
show() { if [ -n "$rev" ]; then git show "$rev:$1"; else cat "$1"; fi; }

count() {  # prints "code total" for the files on stdin
  local code=0 total=0 f c t
  while IFS= read -r f; do
    [ -z "$f" ] && continue
    if show "$f" | head -1 | grep -q GENERATED; then continue; fi
    read -r c t < <(show "$f" | awk '
      { total++ }
      /^[[:space:]]*$/ { next }
      /^[[:space:]]*\/\// { next }
      { code++ }
      END { print code + 0, total + 0 }')
    code=$((code + c)); total=$((total + t))
  done
  echo "$code $total"
}

printf '%-20s %8s %8s\n' folder code all
core=0
for folder in tensor autograd nn:top nn/lm train:top train/io train/dist train/lm:top train/lm/text train/lm/data tools/attnres tools/cli tools/example tools/package tools:top tests; do
  name=${folder%:top}
  if [[ "$folder" == *:top ]]; then files=$(list_files "$name" top); label="$name/ (top)"; else files=$(list_files "$name"); label="$name/"; fi
  [ -z "$files" ] && continue
  read -r c t < <(count <<<"$files")
  printf '%-20s %8d %8d\n' "$label" "$c" "$t"
  case "$label" in tensor/|autograd/|"nn/ (top)") core=$((core + c)) ;; esac
done
echo "core (tensor + autograd + nn): $core code lines; budget $CORE_BUDGET"
if [ -z "$rev" ] && [ "$core" -gt "$CORE_BUDGET" ]; then
  echo "count_lines: the core is over its line budget ($core > $CORE_BUDGET)" >&2
  exit 1
fi
