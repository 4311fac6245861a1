# depthgrad's front door. `make test` and `make reproduce` install what is missing themselves.
#   make test        build (Release) and run the whole suite through ctest, at 1 and 2 threads,
#                    then test-clang and the ASan+UBSan subset (test-sanitize-ci)
#   make test-clang  build the library, the program and the tests with clang++-14 and -Werror
#                    (-O1) in CLANG_BUILD, a folder outside the source tree (default
#                    ../<this folder>-build-clang), and run the suite there but CLANG_SKIP
#   make test-mpi-full  the full multi-rank battery (tests/mpi_train.sh full; ctest runs the quick one)
#   make reproduce   build the program alone and run the rd-attnres reproduction on DATA (default ../shared/data)
#   make bench       the family benchmark: build bench_families alone and run it, OPENBLAS_CORETYPE unset;
#                    one markdown table (printed, and written to BUILD/bench_families.md) of conv2d,
#                    the CNN, LSTM, encoder and ResNet-18 steps against PyTorch (n/a without torch),
#                    float32 and bf16, 1 and 2 threads, about 15 minutes; BENCH_FLAGS passes flags
#                    (tools/bench_families.cpp's header lists them)
#   make bench-kernels  build everything and run the kernel benchmarks (bench_matmul, bench_attention,
#                    bench_conv, bench_bandwidth, depthgrad bench; add --compare-torch by hand)
#   make test-sanitize     the whole suite built with ASan + UBSan (build-sanitize/), through ctest
#   make test-sanitize-ci  the same build, only the tests labelled sanitize-ci (a few minutes)
#   make fuzz        build the libFuzzer targets of tests/fuzz/ with clang (build-fuzz/) and run
#                    each for FUZZ_SECONDS (default 60), one at a time; never part of `make test`
#   make fuzz-corpus rewrite the seed files of tests/fuzz/corpus/ (crash-* regressions stay)
#   make kill-test   SIGKILL training at KILLS (default 50) random moments, resume, compare bytes
#   make gradcheck-teeth  plant a 1% error in each op's backward (then in each op's second
#                         derivative) in turn; gradcheck (gradgradcheck) must fail
#   make learn CHAPTER=N  grade your exercises of chapter N of the learner's path (tools/learn);
#                    the first time, copies the chapter's stubs to tools/learn/mine/, where you edit
#   make PORTABLE=1  build without -march=native
BUILD ?= build
DATA ?= $(if $(DEPTHGRAD_DATA),$(DEPTHGRAD_DATA),../shared/data)
JOBS ?= $(shell nproc)
NATIVE := $(if $(PORTABLE),OFF,ON)
SANITIZE_BUILD ?= build-sanitize
SANITIZE_CXX ?= clang++-14
SANITIZE_FLAGS ?= $(if $(findstring clang,$(SANITIZE_CXX)),-O1 -Wno-pass-failed,-O1)
FUZZ_BUILD ?= build-fuzz
FUZZ_CXX ?= clang++-14
FUZZ_SECONDS ?= 60
CLANG_CXX ?= clang++-14
# -O1 compiles fast; it runs no loop vectorizer, so every `#pragma omp simd` loop would report
# "loop not vectorized" (-Wpass-failed): that one is off.
CLANG_FLAGS ?= -O1 -Wno-pass-failed
CLANG_BUILD ?= $(abspath $(CURDIR)/..)/$(notdir $(CURDIR))-build-clang
# The ctest entries test-clang leaves out: the checks of the source (check_*, count_lines: the
# main build runs them), package_consumer (it installs the package and builds every example
# against it with the compiler that built it, a minute: the main build runs it, and
# test-sanitize runs it with clang), subproject_consumer (it compiles the library once more,
# inside a small project: the main build runs it), mpi_train (a minute; the main build runs it),
# bench_families_table (the benchmarks are not built here; the main build runs it) and the
# learner's path's learn_* (its programs are gcc's: a learner builds with the main build). Every
# other entry runs, the doctest files at 1 and 2 threads and the program's end-to-end scripts from
# an out-of-tree build.
CLANG_SKIP ?= ^(check_.*|count_lines|package_consumer|subproject_consumer|mpi_train|bench_families_table|learn_.*)$$

.PHONY: all deps configure build test test-clang test-mpi-full reproduce bench bench-kernels clean format \
	sanitize-configure sanitize-build test-sanitize test-sanitize-ci fuzz fuzz-corpus kill-test gradcheck-teeth learn

all: build

# DEPS_FOR=build installs what building and running the program needs (make reproduce), test
# (the default) what the suite needs besides: with it, ONNX Runtime for node (the npm package
# onnxruntime-node) into ONNXRUNTIME_DIR, which ctest's onnx_runtime runs the ONNX files in, and
# llama.cpp for node (@fugood/llama.node) into LLAMA_NODE_DIR, which ctest's llama_cpp_client
# runs the GGUF files in.
DEPS_FOR ?= test
ONNXRUNTIME_DIR ?= $(abspath $(BUILD))/onnxruntime-node
LLAMA_NODE_DIR ?= $(abspath $(BUILD))/llama-node
# Under `make test` (NPM_IN_BACKGROUND=1, set for test and what it builds first) the two npm
# installs run in the background, beside the configure step and the compiler, and test waits for
# them (their output and exit status) before ctest: about 9 s that a core spent waiting on the
# network. Any other target runs them in the foreground.
NPM_INSTALLS = ./tools/onnx/install_onnxruntime.sh $(ONNXRUNTIME_DIR) && ./tools/llama/install_llama_node.sh $(LLAMA_NODE_DIR)
deps:
	@./tools/install-deps.sh --for $(DEPS_FOR)
	@if [ "$(DEPS_FOR)" = test ] && [ "$(NPM_IN_BACKGROUND)" = 1 ]; then \
	  rm -f $(BUILD).npm.status; \
	  ( ( $(NPM_INSTALLS) ) > $(BUILD).npm.log 2>&1; echo $$? > $(BUILD).npm.status ) < /dev/null > /dev/null 2>&1 & \
	elif [ "$(DEPS_FOR)" = test ]; then $(NPM_INSTALLS); fi

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DDG_NATIVE=$(NATIVE) \
	  -DDG_TEST_DATA_DIR=$(abspath $(DATA)) -DDG_ONNXRUNTIME_DIR=$(ONNXRUNTIME_DIR) -DDG_LLAMA_NODE_DIR=$(LLAMA_NODE_DIR) > $(BUILD).configure.log || (cat $(BUILD).configure.log; exit 1)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

# The whole suite, then the clang build and its tests, then the sanitize-ci subset
# under ASan + UBSan (its own build of dg_tests only). ctest runs JOBS entries at once; an entry
# that uses two threads claims two (PROCESSORS, set at the end of CMakeLists.txt).
test: NPM_IN_BACKGROUND = 1
test: build
	@if [ "$(DEPS_FOR)" = test ]; then while [ ! -f $(BUILD).npm.status ]; do sleep 1; done; \
	  cat $(BUILD).npm.log >&2; exit $$(cat $(BUILD).npm.status); fi
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) test-clang
	$(MAKE) test-sanitize-ci

# clang++-14, every warning an error (DG_WERROR), -O1: what it compiles is what gcc compiles
# (library, depthgrad, dg_tests, the scaling model, the collectives bench and the examples whose
# ctests run here), so a construct one compiler rejects fails here. A unity build (CMake joins a
# target's sources into a few files): it compiles each header once per batch instead of once per source,
# about a third less time; the gcc build compiles file by file, so a clash between two sources
# (the same name at file scope) fails here and nowhere else.
test-clang: deps
	@cmake -S . -B $(CLANG_BUILD) -DCMAKE_CXX_COMPILER=$(CLANG_CXX) -DCMAKE_BUILD_TYPE=None -DCMAKE_UNITY_BUILD=ON \
	  -DCMAKE_CXX_FLAGS="$(CLANG_FLAGS)" -DDG_WERROR=ON -DDG_NATIVE=$(NATIVE) -DDG_TEST_DATA_DIR=$(abspath $(DATA)) \
	  -DDG_ONNXRUNTIME_DIR=$(ONNXRUNTIME_DIR) -DDG_LLAMA_NODE_DIR=$(LLAMA_NODE_DIR) > $(CLANG_BUILD).configure.log || (cat $(CLANG_BUILD).configure.log; exit 1)
	@cmake --build $(CLANG_BUILD) -j $(JOBS) --target depthgrad dg_tests example_gpt2 scaling_model \
	  example_tabular example_image_folder onnx_export_cases llama_lora_cases finetune_curves \
	  $$(grep -q '^DG_MPI:BOOL=ON' $(CLANG_BUILD)/CMakeCache.txt && echo mpi_collectives_bench)
	cd $(CLANG_BUILD) && ctest --output-on-failure -j $(JOBS) -E '$(CLANG_SKIP)'

# The learner's path: CHAPTER=N grades tools/learn/mine/chNN.cpp (copied from the chapter's stubs
# the first time) with the chapter's checks, in the main build.
learn:
	@test -n "$(CHAPTER)" || { echo "make learn: say which chapter, e.g. make learn CHAPTER=1" >&2; exit 2; }
	@n=$$(printf '%02d' "$(CHAPTER)" 2>/dev/null) && test -f tools/learn/stubs/ch$$n.cpp || \
	  { echo "make learn: no chapter '$(CHAPTER)' (tools/learn/stubs/ has ch01.cpp to ch10.cpp)" >&2; exit 2; }; \
	  mkdir -p tools/learn/mine; \
	  if [ ! -f tools/learn/mine/ch$$n.cpp ]; then cp tools/learn/stubs/ch$$n.cpp tools/learn/mine/ch$$n.cpp; \
	    echo "make learn: copied chapter $(CHAPTER)'s stubs to tools/learn/mine/ch$$n.cpp: write your functions there"; fi
	@$(MAKE) --no-print-directory configure
	@n=$$(printf '%02d' "$(CHAPTER)"); cmake --build $(BUILD) -j $(JOBS) --target learn_ch$$n -- --no-print-directory && \
	  { $(BUILD)/learn_ch$$n || { echo "make learn: some checks still fail (the build is fine): edit tools/learn/mine/ch$$n.cpp and run make learn CHAPTER=$(CHAPTER) again" >&2; exit 1; }; }

test-mpi-full: build
	cmake --build $(BUILD) --target test_mpi_full

# Builds the one program it runs (make test builds the rest).
reproduce:
	@$(MAKE) --no-print-directory configure DEPS_FOR=build
	@cmake --build $(BUILD) -j $(JOBS) --target depthgrad
	$(BUILD)/depthgrad reproduce --paper rd-attnres --dataset-dir $(DATA) --seed 42

BENCH_FLAGS ?=
bench:
	@$(MAKE) --no-print-directory configure DEPS_FOR=build
	@cmake --build $(BUILD) -j $(JOBS) --target bench_families
	env -u OPENBLAS_CORETYPE $(BUILD)/bench_families --out $(BUILD)/bench_families.md \
	  --torch-script tools/torch_bench_families.py $(BENCH_FLAGS)

bench-kernels: build
	@cmake --build $(BUILD) -j $(JOBS) --target bench_matmul bench_attention bench_conv bench_bandwidth
	$(BUILD)/bench_matmul
	$(BUILD)/bench_attention
	$(BUILD)/bench_conv
	$(BUILD)/bench_bandwidth
	$(BUILD)/depthgrad bench

# ASan + UBSan, built with SANITIZE_CXX (clang++-14: its instrumented compile takes half of
# gcc 12's) at -O1 as a unity build (see test-clang). SANITIZE_CXX=g++ works too. Any report fails
# its test.
sanitize-configure: deps
	@cmake -S . -B $(SANITIZE_BUILD) -DCMAKE_CXX_COMPILER=$(SANITIZE_CXX) -DCMAKE_BUILD_TYPE=None \
	  -DCMAKE_CXX_FLAGS="$(SANITIZE_FLAGS)" -DCMAKE_UNITY_BUILD=ON -DDG_NATIVE=$(NATIVE) -DDG_SANITIZE=ON \
	  -DDG_TEST_DATA_DIR=$(abspath $(DATA)) -DDG_ONNXRUNTIME_DIR=$(ONNXRUNTIME_DIR) -DDG_LLAMA_NODE_DIR=$(LLAMA_NODE_DIR) > $(SANITIZE_BUILD).configure.log || (cat $(SANITIZE_BUILD).configure.log; exit 1)

sanitize-build: sanitize-configure
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS)

SANITIZE_ENV := UBSAN_OPTIONS=print_stacktrace=1 ASAN_OPTIONS=detect_leaks=1:strict_string_checks=1

# (-LE sanitize-ci: those entries run a separate program of the same test files, built only by
# test-sanitize-ci; the whole suite runs them in dg_tests already.)
test-sanitize: sanitize-build
	cd $(SANITIZE_BUILD) && $(SANITIZE_ENV) ctest --output-on-failure -j $(JOBS) -LE sanitize-ci

test-sanitize-ci: sanitize-configure
	@cmake --build $(SANITIZE_BUILD) -j $(JOBS) --target dg_sanitize_ci_tests
	cd $(SANITIZE_BUILD) && $(SANITIZE_ENV) ctest --output-on-failure -j $(JOBS) -L sanitize-ci

fuzz:
	@./tools/install-deps.sh --for test $(if $(filter clang++-14,$(FUZZ_CXX)),clang-14 libclang-rt-14-dev)
	@cmake -S . -B $(FUZZ_BUILD) -DCMAKE_BUILD_TYPE=Release -DDG_NATIVE=$(NATIVE) -DDG_FUZZ=ON \
	  -DCMAKE_CXX_COMPILER=$(FUZZ_CXX) > $(FUZZ_BUILD).configure.log || (cat $(FUZZ_BUILD).configure.log; exit 1)
	@cmake --build $(FUZZ_BUILD) -j $(JOBS) --target fuzz_targets
	./tests/fuzz/run_fuzzers.sh $(FUZZ_BUILD) $(FUZZ_SECONDS)

fuzz-corpus: configure
	@cmake --build $(BUILD) -j $(JOBS) --target dg_fuzz_make_corpus
	$(BUILD)/dg_fuzz_make_corpus tests/fuzz/corpus

format:
	./tools/format.sh

clean:
	rm -rf $(BUILD) $(BUILD).configure.log $(BUILD).npm.log $(BUILD).npm.status $(SANITIZE_BUILD) $(SANITIZE_BUILD).configure.log \
	  $(FUZZ_BUILD) $(FUZZ_BUILD).configure.log $(CLANG_BUILD) $(CLANG_BUILD).configure.log

KILLS ?= 50
kill-test: build
	bash tests/kill_resume.sh $(BUILD)/depthgrad $(abspath $(DATA)) $(KILLS)

gradcheck-teeth: configure
	@cmake --build $(BUILD) -j $(JOBS) --target gradcheck_teeth
	bash tools/gradcheck_teeth.sh $(BUILD)/gradcheck_teeth
	bash tools/gradcheck_teeth.sh $(BUILD)/gradcheck_teeth --second
