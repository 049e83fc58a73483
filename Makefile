# drover — the two commands of the quick start, and a few more.
#   make up     install what is missing, build, start droverd on ./.drover
#   make test   install, build (normal + ASan/UBSan), run every test in both
#   make bench  run the benchmarks in bench/ (writes docs/benchmarks.md)
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps build build-asan up test test-normal test-asan bench clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DDROVER_SANITIZE=ON >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

up: build
	@exec scripts/up $(BUILD)

test-normal: build
	@echo "== tests: normal build =="
	@ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

test-asan: build-asan
	@echo "== tests: ASan+UBSan build =="
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(JOBS)

test: test-normal test-asan

# every benchmark in bench/ (each writes its section of docs/benchmarks.md);
# one: make bench BENCH=api
BENCH ?= $(notdir $(patsubst %/run,%,$(wildcard bench/*/run)))
bench: build
	@scripts/install-deps --bench
	@set -e; for b in $(BENCH); do echo "== bench/$$b =="; bench/$$b/run $(BUILD); done

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
