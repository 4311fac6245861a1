#!/usr/bin/env bash
# Installs ONNX Runtime for node (the npm package onnxruntime-node, whose CPU binaries ship in
# the package) into a folder, for the ONNX tests' real client (tests/onnx/run_onnxruntime.js).
# Does nothing when that version is already there and loads. Needs node and npm
# (tools/install-deps.sh installs them; `make test` runs both). Never part of building depthgrad.
#   tools/onnx/install_onnxruntime.sh DIR     ->  DIR/node_modules/onnxruntime-node
# --ignore-scripts: the package's install script only downloads optional GPU binaries, which
# need a network beyond the npm registry; the CPU ones are in the package itself.
set -euo pipefail
version=1.30.0
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: tools/onnx/install_onnxruntime.sh DIR   (installs onnxruntime-node@$version into DIR/node_modules)" >&2
  exit 2
fi
dir="$1"
package="$dir/node_modules/onnxruntime-node"

# Installed, of this version, and loading (its binary matches this machine).
installed() {
  command -v node > /dev/null 2>&1 && [ -f "$package/package.json" ] &&
    ORT_PACKAGE="$(cd "$package" && pwd)" ORT_VERSION="$version" node -e '
      const p = require(process.env.ORT_PACKAGE + "/package.json");
      if (p.version !== process.env.ORT_VERSION) process.exit(1);
      require(process.env.ORT_PACKAGE);' > /dev/null 2>&1
}

if installed; then exit 0; fi
for tool in node npm; do
  if ! command -v "$tool" > /dev/null 2>&1; then
    echo "install_onnxruntime: $tool is missing: tools/install-deps.sh installs it (apt-get install nodejs npm)" >&2
    exit 1
  fi
done
echo "install_onnxruntime: installing onnxruntime-node@$version into $dir/node_modules" >&2
mkdir -p "$dir"
# A package.json of its own, so npm installs here and not into a project above the folder.
[ -f "$dir/package.json" ] || echo '{"private": true, "description": "ONNX Runtime for the ONNX tests"}' > "$dir/package.json"
if ! (cd "$dir" && npm install --ignore-scripts --no-save --no-audit --no-fund --loglevel=error \
  "onnxruntime-node@$version" >&2); then
  echo "install_onnxruntime: npm install onnxruntime-node@$version failed (see npm's message above): the ONNX Runtime test (ctest -R onnx_runtime) will report itself skipped until it is installed" >&2
  exit 1
fi
if ! installed; then
  echo "install_onnxruntime: onnxruntime-node@$version was installed into $dir but does not load in node $(node --version)" >&2
  exit 1
fi
echo "install_onnxruntime: onnxruntime-node@$version ready in $dir/node_modules" >&2
