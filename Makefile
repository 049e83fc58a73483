# drover — the two commands of the quick start, and a few more.
#   make up     install what is missing, build, start droverd on ./.drover
#   make test   install, build (normal + ASan/UBSan), run every test in both,
#               then make bench-smoke
#   make bench  run the benchmarks in bench/ (writes docs/benchmarks.md)
#   make bench-smoke  every benchmark with tiny sizes: runs to the end, prints its table
JOBS ?= $(shell nproc)
# tests mostly wait (daemons, heartbeats, timeouts), so ctest runs twice as
# many at once as there are cores
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 2 )))
BUILD ?= build
ASAN_BUILD ?= build-asan

.PHONY: all deps build build-asan up test test-normal test-asan bench bench-smoke clean

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
	@ctest --test-dir $(BUILD) --output-on-failure -j $(TEST_JOBS)

test-asan: build-asan
	@echo "== tests: ASan+UBSan build =="
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(TEST_JOBS)

# the two suites, then the benchmarks' smoke run (after them, not beside them)
test: test-normal test-asan
	@$(MAKE) --no-print-directory bench-smoke

# every benchmark in bench/ (each writes its section of docs/benchmarks.md);
# one: make bench BENCH=api
BENCH ?= $(notdir $(patsubst %/run,%,$(wildcard bench/*/run)))
bench: build
	@scripts/install-deps --bench
	@set -e; for b in $(BENCH); do echo "== bench/$$b =="; bench/$$b/run $(BUILD); done

# every benchmark in smoke mode (BENCH_SMOKE=1: seconds, not minutes; checks
# each runs to the end and prints its tables; docs/benchmarks.md untouched);
# one: make bench-smoke BENCH=api
bench-smoke: build
	@scripts/install-deps --bench
	@scripts/bench-smoke $(BUILD) $(BENCH)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
