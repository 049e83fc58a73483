# drover — the two commands of the quick start, and a few more.
#   make up     install what is missing, build, start droverd on ./.drover
#   make test   install, build (normal + ASan/UBSan), run every test in both,
#               then make bench-smoke and make fuzz-smoke (scripts/make-test;
#               BUILD_BESIDE=1: the ASan and fuzz trees and bench-smoke run
#               beside the suites)
#   make fuzz   build the libFuzzer targets (fuzz/, clang) and run each for
#               FUZZ_SECONDS (60); one: make fuzz FUZZ=yaml
#   make fuzz-smoke  replay the fuzz regressions, fuzz each target 2 s
#   make bench  run the benchmarks in bench/ (writes docs/benchmarks.md)
#   make bench-smoke  every benchmark with tiny sizes: runs to the end, prints its table
#   make test-tsan  build the ThreadSanitizer tree (build-tsan) and run the tests
#               there (TESTS=regex: only those, ctest -R). Not part of make test:
#               a third build and a third run of the suite, past CI's time budget
JOBS ?= $(shell nproc)
# ctest runs three times as many tests at once as there are cores: a test
# waits on its daemons and on the product's own delays between checks. On 2
# cores, fresh clones of the same commit (2026-12-07): with -j4 the suites
# were 86 % (normal) and 90 % (ASan) busy, dipping to 40 % where the four
# running tests all waited, 322 + 350 s; with -j6 97 % and 98 %, 278 + 321
# s (make test 14:33 -> 13:22, the same CPU: 1,338 and 1,334 s)
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 3 )))
BUILD ?= build
ASAN_BUILD ?= build-asan
FUZZ_BUILD ?= build-fuzz
TSAN_BUILD ?= build-tsan
# test-tsan: a regex of the tests to run (ctest -R, taken as written), e.g.
# make test-tsan TESTS='^t/(jobs|crud)$'
TESTS ?=
# test-tsan's TSAN_OPTIONS: report every race and go on (the tests' log
# check, t/lib/common.bash, fails the test; droverd then exits 66), and show
# both stacks of a lock-order inversion
TSAN_OPTS ?= halt_on_error=0:second_deadlock_stack=1
FUZZ_SECONDS ?= 60
FUZZ ?=
# a new build tree gets Ninja when it is installed (scripts/install-deps
# installs it): it starts far fewer processes than make (the ASan tree:
# 112 s of CPU instead of 139, the fuzz tree 89 instead of 100, the normal
# tree 99 instead of 145, each from scratch with -j2); a tree
# already configured keeps its generator (cmake refuses to change it)
GEN = $(if $(wildcard $(1)/CMakeCache.txt),,$(if $(shell command -v ninja),-G Ninja))
# the ASan and fuzz trees (only tests run their programs) link with lld when
# it is installed (install-deps installs it): relinking the ASan tree's 65
# programs took 15 s of CPU instead of 30 with ld.bfd (11 instead of 21 with
# -g1, below). The normal tree keeps the system linker for its programs, the
# ones benchmarked and shipped (its unit tests link with lld: CMakeLists.txt).
LLD = $(if $(shell command -v ld.lld),-DCMAKE_EXE_LINKER_FLAGS=-fuse-ld=lld -DCMAKE_SHARED_LINKER_FLAGS=-fuse-ld=lld)
# the ASan tree's debug information is line tables only (-g1): its reports
# keep function, file and line for every frame; gdb loses local variables
# (configure a tree with -DCMAKE_C_FLAGS_DEBUG=-g for that). From scratch
# (Ninja, ld.bfd) 112 s of CPU with -g, 90 s with -g1.
ASAN_DEBUG_INFO ?= -g1

.PHONY: all deps build build-asan build-fuzz build-tsan up test test-normal test-asan test-tsan fuzz fuzz-smoke bench bench-smoke clean

all: build

deps:
	@scripts/install-deps

build: deps
	@cmake $(call GEN,$(BUILD)) -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

build-asan: deps
	@cmake $(call GEN,$(ASAN_BUILD)) -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DDROVER_SANITIZE=ON -DCMAKE_C_FLAGS_DEBUG="$(ASAN_DEBUG_INFO)" $(LLD) >/dev/null
	@cmake --build $(ASAN_BUILD) -j $(JOBS)

# everything with ThreadSanitizer (-DDROVER_TSAN=ON: -O1 -g; CMakeLists.txt)
build-tsan: deps
	@cmake $(call GEN,$(TSAN_BUILD)) -S . -B $(TSAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DDROVER_TSAN=ON $(LLD) >/dev/null
	@cmake --build $(TSAN_BUILD) -j $(JOBS)

# the fuzz targets and only the libraries they need, clang with libFuzzer,
# ASan and UBSan (-DDRV_FUZZ=ON; fuzz/CMakeLists.txt)
build-fuzz: deps
	@cmake $(call GEN,$(FUZZ_BUILD)) -S . -B $(FUZZ_BUILD) -DCMAKE_C_COMPILER=clang -DCMAKE_BUILD_TYPE=RelWithDebInfo -DDRV_FUZZ=ON $(LLD) >/dev/null
	@cmake --build $(FUZZ_BUILD) -j $(JOBS)

up: build
	@exec scripts/up $(BUILD)

test-normal: build
	@echo "== tests: normal build =="
	@ctest --test-dir $(BUILD) --output-on-failure -j $(TEST_JOBS)

test-asan: build-asan
	@echo "== tests: ASan+UBSan build =="
	@ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
	  ctest --test-dir $(ASAN_BUILD) --output-on-failure -j $(TEST_JOBS)

# the suite (or TESTS=regex) in the TSan tree: a race in droverd's or an
# agent's log fails the test. Not part of make test (see the top).
test-tsan: build-tsan
	@echo "== tests: ThreadSanitizer build =="
	@TSAN_OPTIONS="$(TSAN_OPTS)" ctest --test-dir $(TSAN_BUILD) --output-on-failure -j $(TEST_JOBS) $(if $(TESTS),-R '$(value TESTS)')

# each fuzz target for FUZZ_SECONDS, one after another (scripts/fuzz)
fuzz: build-fuzz
	@scripts/fuzz $(FUZZ_BUILD) $(FUZZ_SECONDS) $(FUZZ)

# the fuzz targets' regressions replayed and 2 s of fuzzing each (ctest fuzz/NAME)
fuzz-smoke: build-fuzz
	@echo "== fuzz smoke =="
	@ctest --test-dir $(FUZZ_BUILD) --output-on-failure -j $(JOBS)

# the two suites, bench-smoke and fuzz-smoke, one after another, by
# scripts/make-test; BUILD_BESIDE=1 runs the ASan build beside the normal
# suite and the fuzz build and bench-smoke beside the ASan suite, at nice 19:
# not the default, it was slower on 2 CPUs (scripts/make-test says why)
BUILD_BESIDE ?= 0
test: build
	@MAKE="$(MAKE)" LOG_DIR="$(BUILD)/make-test" BUILD_BESIDE="$(BUILD_BESIDE)" scripts/make-test

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
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(TSAN_BUILD)
