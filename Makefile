# The two README commands: `make demo` (set-up + the main job) and `make test` (set-up + all tests).
SHELL := /bin/bash
PY := .venv/bin/python

.PHONY: setup demo lint docs test unit integration shell clean
setup:
	@bash scripts/setup.sh

demo: setup
	@$(PY) -m dr.cli drill --stack local-endpoint --out out/demo

# Static checks (ruff; mypy, strict on dr, verification and stacks/links — pyproject.toml lists the modules not yet
# strict; the documentation site built with --strict, so a broken link or page fails), run before the tests by
# `make test` and `make unit`; any finding fails the build.
LINT_PATHS := dr verification stacks tests benchmarks docs/hooks
lint: setup
	@$(PY) -m ruff check $(LINT_PATHS)
	@$(PY) -m ruff format --check $(LINT_PATHS)
	@$(PY) -m mypy dr verification stacks/links docs/hooks
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict --quiet

# The documentation site (mkdocs.yml, docs/) into site/; `$(PY) -m mkdocs serve` serves it on 127.0.0.1:8000.
docs: setup
	@NO_MKDOCS_2_WARNING=1 $(PY) -m mkdocs build --strict

# Test modules run on TEST_WORKERS processes, a module's tests on one of them (its estate is module-scoped),
# in the suite's own order, longest first (tests/conftest.py heaviest_first; xdist would otherwise put the
# modules with the most tests first, and a ten-minute one-test module last). Ports and state directories
# are per test, reserved across processes (tests/integration/ports.py).
TEST_WORKERS ?= 2
# Every skip is printed with its reason (-rs) and fails the run (tests/conftest.py: a required part never
# skips); each test's duration is kept in out/junit.xml.
test: setup lint
	@mkdir -p out
	@$(PY) -m pytest -q -rs -p no:cacheprovider --durations=25 --junitxml=out/junit.xml -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder tests

# The unit tests alone (tests/unit): no Java, Spark, Kafka or toolchain jars needed; the Spark tests are
# in tests/spark, run by `make test` with everything else.
unit: setup lint
	@$(PY) -m pytest -q -rs -p no:cacheprovider tests/unit

integration: setup
	@$(PY) -m pytest -q -rs -p no:cacheprovider tests/integration

# A shell with pulumi, drctl and the Pulumi environment (local backend, passphrase file) ready.
shell: setup
	@bash --rcfile <(cat ~/.bashrc 2>/dev/null; echo 'source .env; PS1="(kafka-dr) $$PS1"') -i

clean:
	@rm -rf .venv .env
