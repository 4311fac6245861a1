# depthgrad's front door. `make test` and `make reproduce` install what is missing themselves.
#   make test        build (Release) and run the whole suite through ctest, at 1 and 2 threads
#   make reproduce   build and run the rd-attnres reproduction on DATA (default ../shared/data)
#   make bench       build and run the benchmarks (bench_matmul, bench_attention, depthgrad bench; add --compare-torch by hand)
#   make PORTABLE=1  build without -march=native
BUILD ?= build
DATA ?= $(if $(DEPTHGRAD_DATA),$(DEPTHGRAD_DATA),../shared/data)
JOBS ?= $(shell nproc)
NATIVE := $(if $(PORTABLE),OFF,ON)

.PHONY: all deps configure build test reproduce bench clean format

all: build

deps:
	@./tools/install-deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release -DDG_NATIVE=$(NATIVE) \
	  -DDG_TEST_DATA_DIR=$(abspath $(DATA)) > $(BUILD).configure.log || (cat $(BUILD).configure.log; exit 1)

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

test: build
	cd $(BUILD) && ctest --output-on-failure -j 1

reproduce: build
	./$(BUILD)/depthgrad reproduce --paper rd-attnres --dataset-dir $(DATA) --seed 42

bench: build
	./$(BUILD)/bench_matmul
	./$(BUILD)/bench_attention
	./$(BUILD)/depthgrad bench

format:
	clang-format -i $$(git ls-files '*.cpp' '*.h')

clean:
	rm -rf $(BUILD) $(BUILD).configure.log
