#!/usr/bin/env bash
# Installs what depthgrad needs on Debian, and nothing that is already there. Uses apt-get
# (through sudo when not root). Python and torch are never needed here.
#   tools/install-deps.sh [--for build|test] [package...]
#   --for build  what building and running the program needs (`make reproduce`)
#   --for test   that and what the test suite needs besides (the default: `make test`)
# Extra package names given as arguments are installed too (`make fuzz` asks for clang's).
set -euo pipefail
purpose=test
if [ "${1:-}" = "--for" ]; then
  purpose=${2:-}
  shift 2 || true
fi
build_packages=(g++ cmake make libopenblas-openmp-dev doctest-dev libfmt-dev
  libdnnl-dev     # oneDNN: the bf16 matmul kernels (--precision bf16)
  openmpi-bin libopenmpi-dev  # data parallelism over MPI ranks (train/dist/, ctest mpi_train)
  zlib1g-dev      # gzip'd data files (train/io/idx.h)
  libpng-dev libjpeg62-turbo-dev  # PNG and JPEG images (train/io/image.h, ImageFolder)
)
test_packages=(
  pkg-config      # tests/package_consumer.sh builds the example with pkg-config too
  clang-format    # tools/format.sh --check runs in the test suite
  clang-14 libomp-14-dev libclang-rt-14-dev  # make test also builds with clang++-14 (its OpenMP: libomp; ASan, UBSan)
  dataset-fashion-mnist  # the image data set of the CNN example (train/data/fashion_mnist.h)
  python3-onnx    # the onnx checker, the ONNX tests' second client (tests/onnx/check_onnx.py)
)
case "$purpose" in
  build) packages=("${build_packages[@]}" "$@") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}" "$@") ;;
  *) echo "tools/install-deps.sh: --for takes build or test, not '$purpose'" >&2; exit 2 ;;
esac
# node and npm run ONNX Runtime in the ONNX tests (tests/onnx/; tools/onnx/install_onnxruntime.sh
# installs its npm package): Debian's, unless a node and an npm are already on the PATH (a node
# from elsewhere brings its own npm, which Debian's npm package would fight).
if [ "$purpose" = test ]; then
  command -v node > /dev/null 2>&1 || packages+=(nodejs)
  command -v npm > /dev/null 2>&1 || packages+=(npm)
fi
missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "depthgrad: installing ${missing[*]}" >&2
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
