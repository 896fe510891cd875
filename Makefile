# Two entry points a new user needs (see README.md and docs/getting-started.md): `make bench` and `make test`.
## The interpreter the venv is made from: the fastest CPython 3.11 on the machine that can make a venv (a build
## without profile-guided optimisation, pyenv's default, runs pure Python about a fifth slower and the suite up to a
## tenth; scripts/pick_python.py measures and says why). `make PY=/path/to/python3.11` chooses another; an existing
## .venv is kept whatever made it. Recursively expanded: measured only when the venv's packages are installed.
PY ?= $(shell python3 scripts/pick_python.py 2>/dev/null || echo python3)
## Phoenix's own venv (below) is made by the first python3 on PATH: phoenix-constraints.txt was resolved under it, and
## the cached venv is keyed by the minor version alone.
PHOENIX_PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml constraints.txt constraints-lowest.txt | cksum | cut -d' ' -f1)

# The suite starts well over a hundred Python processes that import the project. Where the environment sets
# PYTHONDONTWRITEBYTECODE (container images often do), each of them would compile the project from source again
# (about 0.9 CPU-s a process) and each pytest worker would rewrite every test module again: bytecode goes to the
# clone's ignored __pycache__ folders, as Python does by default.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: bench test test-fast test-full durations lint typecheck venv clean cassettes schema perf notebook live live-deps ci-deps phoenix docs

## The wheels of the package's pinned dependencies (from pip's cache once filled), and of its dependencies at the
## low end of their ranges (constraints-lowest.txt): tests/e2e/test_wheel.py installs the built wheel into a fresh
## venv from each alone, offline (`--no-index`).
WHEELHOUSE := $(VENV)/wheelhouse
WHEELHOUSE_LOWEST := $(VENV)/wheelhouse-lowest

$(STAMP): pyproject.toml constraints.txt constraints-lowest.txt
	test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check --upgrade "pip>=24"
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c constraints.txt -e ".[dev,ray,inspect,adapters,otel,docs]"
	rm -rf $(WHEELHOUSE) && $(BIN)/python -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"], sep="\n")' \
	  > $(VENV)/dependencies.txt
	$(BIN)/python -m pip download --quiet --disable-pip-version-check -c constraints.txt -d $(WHEELHOUSE) \
	  -r $(VENV)/dependencies.txt
	rm -rf $(WHEELHOUSE_LOWEST) && $(BIN)/python -m pip download --quiet --disable-pip-version-check --only-binary :all: \
	  -c constraints-lowest.txt -d $(WHEELHOUSE_LOWEST) -r $(VENV)/dependencies.txt
	rm -f $(VENV)/.installed-* && touch $(STAMP)

## mypy's cache (.mypy_cache) filled with the installed packages' types, once per venv (about 35 CPU-s): `make test`
## then re-checks the project's own files only (about 5 s), in a fresh clone too. Part of `make venv` and of CI's
## `make ci-deps`, not of `make bench` (the main job needs no type check). Its verdict is not this step's: `make test`
## type-checks again and fails on an error.
MYPY_WARM := $(VENV)/.mypy-cache-filled
$(MYPY_WARM): $(STAMP)
	$(BIN)/mypy > /dev/null 2>&1 || true
	touch $(MYPY_WARM)

venv: $(STAMP) $(MYPY_WARM)

## The main job: every built-in case, scripted model, DuckDB file, no network.
bench: $(STAMP)
	$(BIN)/harness-bench run

lint: $(STAMP)
	$(BIN)/ruff check harness runners scripts tests benchmarks
	$(BIN)/ruff format --check harness runners scripts tests

typecheck: $(STAMP)
	$(BIN)/mypy

## The documentation site (docs/, mkdocs.yml) into site/, --strict: a broken link, anchor, snippet or API reference
## fails it. `make test` builds it too, into a temporary folder (tests/e2e/test_docs_site.py).
## NO_MKDOCS_2_WARNING silences Material's banner about MkDocs 2.0, which says nothing about this site.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir site

## Everything CI runs: lint, types, the whole test suite (eval cases included), on one worker process more than
## the machine has cores (a share of the suite waits on subprocesses, servers and signals), one test file per
## worker at a time (a module's shared fixture is built once), in collection order: tests/conftest.py puts the
## heaviest modules first (xdist would otherwise reorder them by their number of tests).
## mypy runs beside pytest, not before it: on a cold cache (a fresh clone) it keeps one core busy for about a minute
## while the other would idle. Its report is printed after pytest's; either failing fails the target, and an
## interrupt stops both. pytest ends with its 12 slowest tests (set-up included): where the time went, in CI's log.
WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 2) + 1 )))
PYTEST_PAR ?= -n $(WORKERS) --dist loadfile --no-loadscope-reorder
test: $(STAMP)
	$(BIN)/ruff check harness runners scripts tests benchmarks
	@log=$$(mktemp); $(BIN)/mypy > "$$log" 2>&1 & mypy=$$!; \
	trap 'kill $$mypy 2>/dev/null; rm -f "$$log"' EXIT INT TERM; \
	echo "$(BIN)/mypy (beside pytest; its report follows pytest's)"; \
	echo "$(BIN)/python -m pytest -q $(PYTEST_PAR) --durations=12"; \
	$(BIN)/python -m pytest -q $(PYTEST_PAR) --durations=12; rc=$$?; \
	wait $$mypy; mrc=$$?; echo "== mypy"; cat "$$log"; \
	[ $$rc -eq 0 ] && [ $$mrc -eq 0 ]

## The loop before every commit: the Harness library, the evaluation cases and the bench's modules on their own
## (every module not marked `slow`: those measured under 3 CPU-s in tests/durations.json), no lint.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q $(PYTEST_PAR) -m "not slow"

## Measure the suite: each test module's wall and CPU time (its fixtures' setup and teardown included) into the
## committed tests/durations.json, from which tests/conftest.py marks the `slow` modules and orders `make test`'s
## modules heaviest first. One process (the figures are a module's own, not a share of a loaded machine); re-run it
## on a quiet machine after adding or speeding up a heavy module. Some modules only:
## `pytest -n 0 tests/x.py --durations-out tests/durations.json` replaces their entries and keeps the rest.
durations: $(STAMP)
	$(BIN)/python -m pytest -q -n 0 -p no:cacheprovider --durations-out tests/durations.json

## `make test` with every interrupt moment (20 instead of the sampled 10).
test-full: $(STAMP)
	HB_ALL_MOMENTS=1 $(MAKE) test

## What CI's checks need from the distribution: Chromium (tests/runners/rendering/test_report.py measures the report page in it).
## Idempotent: once installed, nothing is downloaded. Debian/Ubuntu package `chromium`, through apt-get.
## And Arize Phoenix in its own cached venv (`make phoenix`): tests/e2e/test_phoenix.py exports a bench run to it.
## And the live model's server wheel and verified GGUF in the cache folder (`make live-deps`):
## tests/runners/live/test_serve_model_live.py serves it, so in CI it runs instead of skipping.
## And mypy's cache of the installed packages' types ($(MYPY_WARM), above), as `make venv` fills it.
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
ci-deps: phoenix live-deps $(MYPY_WARM)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || { \
	  echo "make ci-deps: installing chromium (apt-get)"; \
	  $(SUDO) apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq --no-install-recommends chromium; }
	@echo "make ci-deps: $$(command -v chromium || command -v chromium-browser) ready"

## Arize Phoenix (the trace backend the OpenTelemetry export is checked against) in a venv of its own, from the
## pins in phoenix-constraints.txt, cached in $HARNESS_BENCH_PHOENIX_DIR (default ~/.cache/harness-bench/phoenix) by a
## stamp: once installed, nothing is downloaded. Its pins do not resolve against constraints.txt, hence its own venv.
phoenix:
	$(PHOENIX_PY) -m scripts.phoenix

## The xllamacpp wheel and $(LIVE_MODEL)'s GGUF (verified by SHA-256) in $HARNESS_BENCH_LLAMA_DIR (default
## .llama-server/), nothing served; cached by stamps, so once installed nothing is downloaded.
live-deps: $(STAMP)
	$(BIN)/python -m runners.live --model $(LIVE_MODEL) --install-only

## Benchmarks (figures as medians with min/max; never part of `make test`).
perf: $(STAMP)
	$(BIN)/python benchmarks/run_all.py

## Execute the calibration notebook on the project's own kernel.
notebook: $(STAMP)
	$(BIN)/python -m scripts.run_notebook notebooks/threshold_sweep.ipynb

## A real local LLM (llama.cpp's server from the prebuilt xllamacpp wheel, --jinja, + Gemma 3 270M) on 127.0.0.1
## (CI runs it after `test`); every live run is recorded to a cassette and must replay identically.
## The script exits 1 on a structural, rendered-prompt or replay violation: make fails. It exits 2 when the server
## could not be set up: a loud WARNING, and make succeeds (make would turn both into 2 otherwise); live-status.txt
## says PASSED / FAILED / SKIPPED and why (.ci/run prints it last).
# The live check runs on Qwen2.5-Coder 0.5B Instruct: measured inside CI's time, its calls reach the backend and it
# writes valid Drafts, which the base Gemma 3 270M (the program's own default) never does. LIVE_MODEL=gemma3-270m
# runs Gemma (native tool calls) instead.
LIVE_MODEL ?= qwen2.5-coder-0.5b
LIVE_CMD ?= $(BIN)/python -m runners.live --model $(LIVE_MODEL)
live: $(STAMP)
	@$(LIVE_CMD); rc=$$?; \
	if [ $$rc -eq 2 ]; then \
	  echo "WARNING: make live: the local model server could not be set up (the error above names its log):" \
	       "live check SKIPPED, not passed" >&2; \
	  exit 0; \
	fi; \
	exit $$rc

## Re-record the committed cassettes through serve-sim (run after changing cases or prompts).
cassettes: $(STAMP)
	$(BIN)/python -m scripts.record_cassettes --out cassettes

## Regenerate the evaluation-file JSON Schema.
schema: $(STAMP)
	$(BIN)/harness-bench schema > evalsets/schema.json

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache .hypothesis bench.duckdb site
