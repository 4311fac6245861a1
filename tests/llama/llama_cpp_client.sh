#!/usr/bin/env bash
# ctest's llama_cpp_client: depthgrad's GGUF files of fine-tuned models run by llama.cpp itself
# (the npm package @fugood/llama.node, tests/llama/run_llama.js). For the tiny imported Llama and
# GPT-2, each trained a little with a LoRA adapter over it (tests/llama/lora_cases.cpp), greedy
# continuations of one prompt must agree:
#   llama.cpp on base.gguf (f16)                    = depthgrad generate on the base
#   llama.cpp on merged-f16.gguf (--merge-lora)     = depthgrad generate on the merged model
#   llama.cpp on merged-q8.gguf (--quant q8_0)      = depthgrad generate on the merged model with
#                                                     the q8_0 tensors' dequantized values
#   llama.cpp on base.gguf + adapter.gguf (--lora)  = llama.cpp on merged-f16.gguf
#   llama.cpp on base-q8.gguf + adapter.gguf        = depthgrad generate on the base's q8_0
#                                                     dequantization with the adapter merged
# and the adapter must matter (the merged text is not the base's). Compared as text, and the
# count of tokens llama.cpp streamed must be the count asked for (the package reports no ids).
# Before that, the export's refusals of unclear flags (exit 2, one line). Skipped (77, with a
# message) where node or the package is missing.
# Usage: tests/llama/llama_cpp_client.sh DEPTHGRAD CASE_PROGRAM HF_DATA_DIR LLAMA_NODE_DIR WORK_DIR
set -u
if [ $# -ne 5 ]; then
  echo "usage: tests/llama/llama_cpp_client.sh DEPTHGRAD CASE_PROGRAM HF_DATA_DIR LLAMA_NODE_DIR WORK_DIR" >&2
  exit 2
fi
depthgrad="$1"
cases_program="$2"
hf_data="$3"
llama_dir="$4"
work="$5"
here="$(cd "$(dirname "$0")" && pwd)"
prompt="a fox"
tokens=10
failures=0
passes=0
pass() { passes=$((passes + 1)); echo "ok: $1"; }
fail() { failures=$((failures + 1)); echo "FAIL: $1"; }

rm -rf "$work"
mkdir -p "$work"
if ! "$cases_program" "$hf_data" "$work"; then
  echo "FAIL: the case program failed"
  exit 1
fi
pass "the case program trained the bases and adapters"

# --- the export's refusals: exit 2 and one line naming the flag ----------------------------
refused() {  # refused PATTERN ARGS...: exit 2 with a message matching PATTERN
  local pattern="$1"
  shift
  "$depthgrad" export "$@" > "$work/refusal.out" 2>&1
  local rc=$?
  if [ $rc -eq 2 ] && grep -qE -- "$pattern" "$work/refusal.out"; then
    pass "refused: $*"
  else
    fail "not refused as expected (exit $rc): $* -> $(cat "$work/refusal.out")"
  fi
}
a="$work/llama"
refused "needs --adapter" --to gguf --base "$a/base" --lora-adapter --output "$work/x.gguf"
refused "give one" --to gguf --adapter "$a/adapter" --merge-lora --lora-adapter --output "$work/x.gguf"
refused "say what to write" --to gguf --adapter "$a/adapter" --output "$work/x.gguf"
refused "q8_0" --to gguf --base "$a/base" --quant q4_0 --output "$work/x.gguf"
refused "applies to --to gguf" --to hf --checkpoint "$a/base/model.safetensors" --quant q8_0 --output "$work/x"
refused "both name the base" --to gguf --base "$a/base" --checkpoint "$a/base/model.safetensors" --output "$work/x.gguf"
mkdir -p "$work/orphan"
cp "$a/adapter/adapter_model.safetensors" "$work/orphan/"
sed 's|"base_model_name_or_path": "[^"]*"|"base_model_name_or_path": "no-such-base"|' \
  "$a/adapter/adapter_config.json" > "$work/orphan/adapter_config.json"
refused "base_model_name_or_path 'no-such-base' is not a folder here" --to gguf \
  --adapter "$work/orphan" --merge-lora --output "$work/x.gguf"

# --- the files ----------------------------------------------------------------------------
for arch in llama gpt2; do
  a="$work/$arch"
  if "$depthgrad" export --to gguf --base "$a/base" --type f16 --output "$a/base.gguf" &&
    "$depthgrad" export --to gguf --adapter "$a/adapter" --lora-adapter --output "$a/adapter.gguf" &&
    "$depthgrad" export --to gguf --adapter "$a/adapter" --merge-lora --type f16 --output "$a/merged-f16.gguf" &&
    "$depthgrad" export --to gguf --adapter "$a/adapter" --merge-lora --quant q8_0 --output "$a/merged-q8.gguf" &&
    "$depthgrad" export --to gguf --base "$a/base" --quant q8_0 --output "$a/base-q8.gguf"; then
    pass "$arch: exported base (f16, q8_0), adapter, merged f16 and merged q8_0"
  else
    fail "$arch: an export failed"
  fi
  for model in base merged merged_q8 base_q8_adapter; do
    "$depthgrad" generate --checkpoint "$a/$model/model.safetensors" --prompt "$prompt" \
      --max-new-tokens $tokens --temperature 0 --quiet > "$a/$model.depthgrad.txt" ||
      fail "$arch: depthgrad generate on $model"
  done
done

# --- llama.cpp ----------------------------------------------------------------------------
if ! command -v node > /dev/null 2>&1; then
  echo "SKIPPED: llama_cpp_client needs node to run llama.cpp (tools/install-deps.sh installs it: apt-get install nodejs npm); $passes checks passed, $failures failed before it"
  [ $failures -eq 0 ] && exit 77 || exit 1
fi
# run_llama NAME ARGS...: llama.cpp's continuation into $a/NAME.json, its text into NAME.llama.txt
run_llama() {
  local name="$1"
  shift
  node "$here/run_llama.js" --llama-dir "$llama_dir" --tokens $tokens "$@" "$prompt" \
    > "$a/$name.llama.out" 2> "$a/$name.llama.err"
  local rc=$?
  if [ $rc -eq 77 ]; then
    cat "$a/$name.llama.err"
    echo "SKIPPED: @fugood/llama.node is not in $llama_dir (tools/llama/install_llama_node.sh $llama_dir installs it); $passes checks passed, $failures failed before it"
    [ $failures -eq 0 ] && exit 77 || exit 1
  fi
  if [ $rc -ne 0 ]; then
    fail "$arch: llama.cpp on $name (exit $rc): $(tail -n 3 "$a/$name.llama.err")"
    return
  fi
  grep '^{' "$a/$name.llama.out" | tail -n 1 > "$a/$name.json"
  # The text exactly as depthgrad generate prints it (one newline after; the pieces joined, as
  # the package's "text" stops at a NUL byte), and the token count.
  node -e '
    const r = JSON.parse(require("fs").readFileSync(process.argv[1], "utf8"));
    process.stdout.write(r.pieces.join("") + "\n");
    if (r.pieces.length !== Number(process.argv[2])) process.exit(3);' \
    "$a/$name.json" $tokens > "$a/$name.llama.txt" ||
    fail "$arch: llama.cpp on $name streamed other than $tokens tokens: $(cat "$a/$name.json")"
}
# same WHAT A B: files A and B hold the same text
same() {
  if cmp -s "$2" "$3"; then
    pass "$arch: $1: '$(head -c 60 "$2")'"
  else
    fail "$arch: $1: '$(cat "$2")' != '$(cat "$3")'"
  fi
}
for arch in llama gpt2; do
  a="$work/$arch"
  run_llama base "$a/base.gguf"
  run_llama merged-f16 "$a/merged-f16.gguf"
  run_llama merged-q8 "$a/merged-q8.gguf"
  run_llama base+adapter --lora "$a/adapter.gguf" "$a/base.gguf"
  run_llama base-q8+adapter --lora "$a/adapter.gguf" "$a/base-q8.gguf"
  same "llama.cpp on base.gguf = depthgrad on the base" "$a/base.llama.txt" "$a/base.depthgrad.txt"
  same "llama.cpp on merged-f16.gguf = depthgrad on the merged model" \
    "$a/merged-f16.llama.txt" "$a/merged.depthgrad.txt"
  same "llama.cpp on merged-q8.gguf = depthgrad on the q8_0-dequantized merged model" \
    "$a/merged-q8.llama.txt" "$a/merged_q8.depthgrad.txt"
  same "llama.cpp on base.gguf + adapter.gguf = llama.cpp on merged-f16.gguf" \
    "$a/base+adapter.llama.txt" "$a/merged-f16.llama.txt"
  same "llama.cpp on base-q8.gguf + adapter.gguf = depthgrad on the q8_0 base + adapter" \
    "$a/base-q8+adapter.llama.txt" "$a/base_q8_adapter.depthgrad.txt"
  if cmp -s "$a/merged.depthgrad.txt" "$a/base.depthgrad.txt"; then
    fail "$arch: the adapter changes nothing: the merged model continues as the base"
  else
    pass "$arch: the adapter matters: the base continues '$(head -c 40 "$a/base.depthgrad.txt")'"
  fi
done
echo "$passes passed, $failures failed"
[ $failures -eq 0 ]
