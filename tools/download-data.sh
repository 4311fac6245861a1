#!/usr/bin/env bash
# Fetches the four pinned data set files into DATA_DIR (default: $DEPTHGRAD_DATA, else ./data),
# checking each against its pinned SHA-256 before an atomic rename into place. Files already
# present with the right hash are kept. Never run by the tests; needs curl or wget, and sha256sum.
# The table below must agree with train/lm/data/data_files.cpp (tests/test_data_files.cpp checks it).
set -euo pipefail

data_dir="${1:-${DEPTHGRAD_DATA:-./data}}"

# relative path | sha256 | canonical URL (tracks a branch) | the same file at a fixed commit
files=(
  "wikitext-2/train.txt|9e9fa1ad55b1c2c95b08e37dd8e653f638fac2c6de904b79e813611eefbc985f|https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/wikitext-2/train.txt|https://raw.githubusercontent.com/pytorch/examples/77f55b912142e11fcfdf5b530231fb9c52f181e8/word_language_model/data/wikitext-2/train.txt"
  "wikitext-2/valid.txt|f0737ed31fc1329026e95cb8b98e19c2a182c39c240ab909dc31abf2f8af58e8|https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/wikitext-2/valid.txt|https://raw.githubusercontent.com/pytorch/examples/77f55b912142e11fcfdf5b530231fb9c52f181e8/word_language_model/data/wikitext-2/valid.txt"
  "wikitext-2/test.txt|d790b833ef8cf03a90db7bf1271b7520b83c45ce07ba3c1a9699df81e239eca0|https://raw.githubusercontent.com/pytorch/examples/main/word_language_model/data/wikitext-2/test.txt|https://raw.githubusercontent.com/pytorch/examples/77f55b912142e11fcfdf5b530231fb9c52f181e8/word_language_model/data/wikitext-2/test.txt"
  "tiny_shakespeare.txt|86c4e6aa9db7c042ec79f339dcb96d42b0075e16b8fc2e86bf0ca57e2dc565ed|https://raw.githubusercontent.com/karpathy/char-rnn/master/data/tinyshakespeare/input.txt|https://raw.githubusercontent.com/karpathy/char-rnn/6f9487a6fe5b420b7ca9afb0d7c078e37c1d1b4e/data/tinyshakespeare/input.txt"
)

if command -v curl >/dev/null 2>&1; then
  fetch() { curl --fail --location --silent --show-error --retry 3 --max-time 300 -o "$2" "$1"; }
elif command -v wget >/dev/null 2>&1; then
  fetch() { wget --quiet --tries=3 --timeout=120 -O "$2" "$1"; }
else
  echo "download-data.sh: need curl or wget to download the data" >&2
  exit 1
fi
command -v sha256sum >/dev/null 2>&1 || { echo "download-data.sh: need sha256sum (coreutils)" >&2; exit 1; }

sha_of() { sha256sum "$1" | cut -d' ' -f1; }

temp=""
trap '[[ -n "$temp" ]] && rm -f "$temp"' EXIT

failed=0
for entry in "${files[@]}"; do
  IFS='|' read -r relative expected url pinned_url <<<"$entry"
  dest="$data_dir/$relative"
  if [[ -f "$dest" && "$(sha_of "$dest")" == "$expected" ]]; then
    echo "ok       $dest"
    continue
  fi
  mkdir -p "$(dirname "$dest")"
  temp="$(mktemp "$dest.download.XXXXXX")"
  done_one=0
  for source in "$url" "$pinned_url"; do
    echo "fetching $dest from $source"
    if ! fetch "$source" "$temp"; then
      echo "  download failed" >&2
      continue
    fi
    got="$(sha_of "$temp")"
    if [[ "$got" != "$expected" ]]; then
      echo "  sha256 mismatch: got $got, expected $expected" >&2
      continue
    fi
    sync "$temp" 2>/dev/null || true
    mv -f "$temp" "$dest"
    temp=""
    done_one=1
    echo "ok       $dest"
    break
  done
  if [[ $done_one -eq 0 ]]; then
    rm -f "$temp"
    temp=""
    echo "download-data.sh: could not fetch $relative with the expected sha256 $expected" >&2
    failed=1
  fi
done
exit $failed
