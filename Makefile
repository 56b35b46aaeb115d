# Entry points: `make demo` and `make test` do all set-up on a fresh Debian 12 machine.
BUILD_DIR ?= build
BUILD_TYPE ?= RelWithDebInfo
JOBS ?= $(shell nproc)
CMAKE_FLAGS ?=

.PHONY: all deps venv configure build test test-sanitize fuzz install package demo demo-function demo-torchscript tune-criteria format clean

all: build

deps:
	@scripts/install-deps.sh

# tune's Python environment (scripts/install-venv.sh, docs/overview.md "The Python environment"):
# a virtual environment with the released Optuna 5.0, optuna-dashboard, PyTorch and Hugging Face's
# libraries, pinned and hash-checked (scripts/python-requirements.txt), which the tests that run
# beside Optuna 5.0 use. Made or refreshed before `make test`; nothing to do, and no network,
# when it is current. TUNE_VENV=DIR puts it elsewhere than .venv; `make test` hands its Python to
# the tests in $TUNE_VENV_PYTHON.
TUNE_VENV ?= .venv
venv: deps
	@scripts/install-venv.sh --venv $(TUNE_VENV)

$(BUILD_DIR)/CMakeCache.txt:
	cmake -S . -B $(BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) $(CMAKE_FLAGS)

configure: deps $(BUILD_DIR)/CMakeCache.txt

build: configure
	cmake --build $(BUILD_DIR) -j $(JOBS)

test: venv build
	cd $(BUILD_DIR) && TUNE_VENV_PYTHON=$(abspath $(TUNE_VENV))/bin/python \
	  ctest --output-on-failure -j $(JOBS)

# The LibTorch-free unit suites (ctest label `unit`: tune_core_tests, tune_tracking_tests,
# tune_storage_tests, tune_fuzz_replay_tests) built with AddressSanitizer and
# UndefinedBehaviorSanitizer in their own build directory, and run (docs/overview.md, "Fuzzing and
# sanitizers"), without LibTorch and PostgreSQL. SANITIZE_TARGETS and SANITIZE_CTEST_ARGS narrow
# it: SANITIZE_TARGETS=tune_fuzz_replay_tests SANITIZE_CTEST_ARGS='-R FuzzReplay'.
SANITIZE_BUILD_DIR ?= build-sanitize
SANITIZE_TARGETS ?= tune_core_tests tune_tracking_tests tune_storage_tests tune_fuzz_replay_tests
SANITIZE_CTEST_ARGS ?=
test-sanitize: deps
	cmake -S . -B $(SANITIZE_BUILD_DIR) -DCMAKE_BUILD_TYPE=$(BUILD_TYPE) -DTUNE_SANITIZE=ON \
	  -DTUNE_WITH_TORCH=OFF -DTUNE_WITH_POSTGRES=OFF -DTUNE_BUILD_BENCH=OFF $(CMAKE_FLAGS)
	cmake --build $(SANITIZE_BUILD_DIR) -j $(JOBS) --target $(SANITIZE_TARGETS)
	cd $(SANITIZE_BUILD_DIR) && ASAN_OPTIONS=detect_leaks=1 \
	  UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS) -L unit \
	  $(SANITIZE_CTEST_ARGS)

# The libFuzzer targets of tests/fuzz/ (ASan + UBSan, clang-14) built in $(FUZZ_BUILD_DIR) and run
# FUZZ_SECONDS (wall) each (FUZZ_TARGETS: a subset, e.g. "pickle safetensors"); one line per target
# (CPU and wall seconds, rounds, executions, corpus, edges covered, findings) and libFuzzer's final
# lines in $(FUZZ_BUILD_DIR)/fuzz-summary.txt. Findings go to $(FUZZ_BUILD_DIR)/fuzz-findings/.
# FUZZ_CPU_SECONDS=N gives each target N seconds of CPU time (user + system) instead: rounds of at
# most FUZZ_SECONDS wall seconds, each from the corpus the earlier ones grew, until the fuzzer's CPU
# time reaches N (scripts/fuzz.sh). On a shared machine: `nice -n 19 make fuzz ...`.
FUZZ_BUILD_DIR ?= build-fuzz
FUZZ_SECONDS ?= 60
FUZZ_CPU_SECONDS ?= 0
FUZZ_TARGETS ?=
fuzz: deps
	cmake -S . -B $(FUZZ_BUILD_DIR) -DCMAKE_CXX_COMPILER=clang++-14 -DCMAKE_C_COMPILER=clang-14 \
	  -DTUNE_FUZZ=ON -DTUNE_WITH_TORCH=OFF -DTUNE_BUILD_BENCH=OFF \
	  -DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" $(CMAKE_FLAGS)
	cmake --build $(FUZZ_BUILD_DIR) -j $(JOBS) --target tune_fuzz_targets_all
	FUZZ_CPU_SECONDS=$(FUZZ_CPU_SECONDS) scripts/fuzz.sh $(FUZZ_BUILD_DIR) $(FUZZ_SECONDS) \
	  $(FUZZ_TARGETS)

# tune, its libraries and plugins, the Python module, the man page and the bash completion under
# PREFIX (docs/cli.md#installing); DESTDIR stages them elsewhere, as for a package.
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD_DIR) --prefix $(PREFIX)

# A Debian package of the same under /usr: $(BUILD_DIR)/tune_<version>_<arch>.deb.
package: build
	cd $(BUILD_DIR) && cpack -G DEB

# Tunes tiny transformers on the fortunes topic data (Debian's fortunes package) on CPU under the
# memory guard, on a simulated 64 MiB card (configs/fortunes.json): a few minutes. Prints the
# baselines to beat, runs the study into $(BUILD_DIR)/demo.db (anew each time) and writes its
# report page. The data set goes to build/data/fortunes, where configs/fortunes.json reads it.
DEMO_DB = $(BUILD_DIR)/demo.db
demo: build
	/usr/bin/python3 scripts/prepare-fortunes.py --out build/data/fortunes
	@/usr/bin/python3 scripts/fortunes-baselines.py build/data/fortunes
	rm -f $(DEMO_DB) $(DEMO_DB)-wal $(DEMO_DB)-shm
	$(BUILD_DIR)/tune --study fortunes --storage sqlite:///$(DEMO_DB) --jobs 2
	$(BUILD_DIR)/tune report --study fortunes --storage sqlite:///$(DEMO_DB) \
	  --output $(BUILD_DIR)/demo-report.html
	@echo "The study's report page: $(abspath $(BUILD_DIR))/demo-report.html"

# Your own PyTorch model trained in process (configs/fortunes-torchscript.json, docs/config.md
# "TorchScript models"): the block-attention classifier of a user report, exported as TorchScript
# by scripts/torchscript_models.py, tuned on four fortunes topics on CPU (a few minutes); the best
# trial's trained module is saved to $(BUILD_DIR)/demo-torchscript-best and `tune predict`
# reproduces its validation value.
demo-torchscript: build
	/usr/bin/python3 scripts/prepare-fortunes.py --out build/data/fortunes-4 \
	  --labels computers,food,love,politics
	/usr/bin/python3 scripts/torchscript_models.py block-attention --vocab-size 8000 \
	  --num-labels 4 --dropout 0.1 --out build/data/block_attention.pt
	$(BUILD_DIR)/tune --study fortunes-torchscript --config configs/fortunes-torchscript.json \
	  --save-best $(BUILD_DIR)/demo-torchscript-best
	$(BUILD_DIR)/tune predict --model $(BUILD_DIR)/demo-torchscript-best \
	  --data build/data/fortunes-4/validation.jsonl --output $(BUILD_DIR)/demo-torchscript-predictions.jsonl

# The built-in 'mixed' error surface with the heavy/base model space: seconds, no LibTorch.
demo-function: build
	$(BUILD_DIR)/tune --study demo --storage memory

# The criteria study of the user reports (configs/criteria.json): seven encoders, 5000 trials on a
# 24 GiB CUDA device under the memory guard; run it again to resume. DEVICE=cpu trains on CPU
# (slow: full-size models), N_TRIALS=N changes the target, DEVICE_MEMORY=16GiB the card.
tune-criteria: build
	/usr/bin/python3 scripts/prepare-fortunes.py --out build/data/fortunes
	$(BUILD_DIR)/tune --study criteria $(if $(DEVICE),--device $(DEVICE)) \
	  $(if $(N_TRIALS),--n-trials $(N_TRIALS)) $(if $(DEVICE_MEMORY),--device-memory $(DEVICE_MEMORY))

format:
	clang-format -i $$(git ls-files '*.h' '*.cpp' '*.cu')

clean:
	rm -rf $(BUILD_DIR)
