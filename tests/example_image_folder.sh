#!/usr/bin/env bash
# The ImageFolder example end to end (tools/example/image_folder.cpp): writes 200 Fashion-MNIST
# images per split as PNG files, trains one epoch on them through ImageFolder with 0 and with 2
# loader workers, and checks that it beats chance (10 classes: 0.2 required) and that both runs
# print the same loss and accuracy (the workers change no bit).
# Usage: tests/example_image_folder.sh EXAMPLE_BINARY
set -euo pipefail
example=$1
work=$(mktemp -d "${TMPDIR:-/tmp}/dg-image-folder-XXXXXX")
trap 'rm -rf "$work"' EXIT
"$example" --write-fashion-mnist "$work" --count 200
"$example" --train "$work" --epochs 1 --min-accuracy 0.2 | tee "$work/workers0.log"
"$example" --train "$work" --epochs 1 --min-accuracy 0.2 --workers 2 > "$work/workers2.log"
if ! diff <(grep -o 'train loss.*' "$work/workers0.log") <(grep -o 'train loss.*' "$work/workers2.log"); then
  echo "example_image_folder: 2 loader workers gave another loss or accuracy than none" >&2
  exit 1
fi
echo "example_image_folder: the same loss and accuracy with 0 and 2 loader workers"
