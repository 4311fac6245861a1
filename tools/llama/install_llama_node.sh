#!/usr/bin/env bash
# Installs llama.cpp for node (the npm package @fugood/llama.node, pinned, with its linux-x64 CPU
# binaries, @fugood/node-llama-linux-x64) into a folder, for the GGUF tests' real client
# (tests/llama/run_llama.js, ctest llama_cpp_client). Does nothing when that version is already
# there and loads. Needs node and npm (tools/install-deps.sh installs them; `make test` runs
# both). Never part of building depthgrad.
#   tools/llama/install_llama_node.sh DIR     ->  DIR/node_modules/@fugood/llama.node
# --ignore-scripts: the package's postinstall only checks for a local build. --omit=optional:
# the package lists every platform's binaries (CUDA and Vulkan builds of 60 to 200 MB among them)
# as optional dependencies; only the CPU one for linux-x64 is needed, so it is installed by name,
# at the same version, and the optional ones are left out.
set -euo pipefail
version=1.7.15
if [ $# -ne 1 ] || [ -z "$1" ]; then
  echo "usage: tools/llama/install_llama_node.sh DIR   (installs @fugood/llama.node@$version into DIR/node_modules)" >&2
  exit 2
fi
dir="$1"
package="$dir/node_modules/@fugood/llama.node"

# Installed, of this version, and loading (its binary matches this machine).
installed() {
  command -v node > /dev/null 2>&1 && [ -f "$package/package.json" ] &&
    LLAMA_MODULES="$(cd "$dir/node_modules" && pwd)" LLAMA_VERSION="$version" node -e '
      const modules = process.env.LLAMA_MODULES + "/@fugood/";
      for (const name of ["llama.node", "node-llama-linux-x64"]) {
        const p = require(modules + name + "/package.json");
        if (p.version !== process.env.LLAMA_VERSION) process.exit(1);
      }
      require(modules + "node-llama-linux-x64");  // the native binary loads on this machine
      require(modules + "llama.node");' > /dev/null 2>&1
}

if installed; then exit 0; fi
case "$(uname -s)-$(uname -m)" in
  Linux-x86_64) ;;
  *)
    echo "install_llama_node: only linux-x64's CPU binaries are installed here; on $(uname -s)-$(uname -m) the llama.cpp test (ctest -R llama_cpp_client) reports itself skipped" >&2
    exit 1
    ;;
esac
for tool in node npm; do
  if ! command -v "$tool" > /dev/null 2>&1; then
    echo "install_llama_node: $tool is missing: tools/install-deps.sh installs it (apt-get install nodejs npm)" >&2
    exit 1
  fi
done
echo "install_llama_node: installing @fugood/llama.node@$version into $dir/node_modules" >&2
mkdir -p "$dir"
# A package.json of its own, so npm installs here and not into a project above the folder.
[ -f "$dir/package.json" ] || echo '{"private": true, "description": "llama.cpp for the GGUF tests"}' > "$dir/package.json"
if ! (cd "$dir" && npm install --ignore-scripts --omit=optional --no-save --no-audit --no-fund \
  --loglevel=error "@fugood/llama.node@$version" "@fugood/node-llama-linux-x64@$version" >&2); then
  echo "install_llama_node: npm install @fugood/llama.node@$version failed (see npm's message above): the llama.cpp test (ctest -R llama_cpp_client) will report itself skipped until it is installed" >&2
  exit 1
fi
if ! installed; then
  echo "install_llama_node: @fugood/llama.node@$version was installed into $dir but does not load in node $(node --version)" >&2
  exit 1
fi
echo "install_llama_node: @fugood/llama.node@$version ready in $dir/node_modules" >&2
