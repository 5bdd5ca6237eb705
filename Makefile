# The two commands a new user needs: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
# torch is pinned in pyproject's `torch` extra: unpinned, it pulls several GB of CUDA packages.
CHECKED := src tests bench examples tools

.PHONY: demo test lint check-types unit bench-launch audit sandbox-tools postgres-tools clean

# The pip a venv starts with may be older than its security fixes (23.2.1: PYSEC-2023-228).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade 'pip>=23.3'

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[torch,onnx]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[torch,s3,onnx,postgres,ray,kubernetes,dev,xgboost]'
	touch $@ $(VENV)/.demo-installed

# Learners run in a bubblewrap sandbox when the platform runs as root (Debian's package);
# elsewhere Loom serves one user only, and says so.
sandbox-tools:
	@if command -v bwrap >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null); \
	else echo "bubblewrap is not installed: jobs will not be sandboxed (see docs/security.md)"; fi

# The tests start a throw-away PostgreSQL server of their own from Debian's binaries.
postgres-tools:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq postgresql >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null && apt-get install -y -qq postgresql >/dev/null); \
	else echo "PostgreSQL is not installed: install it (apt-get install postgresql)"; exit 1; fi

demo: $(VENV)/.demo-installed sandbox-tools
	$(BIN)/python examples/demo.py

lint: $(VENV)/.test-installed
	$(BIN)/ruff check $(CHECKED)
	$(BIN)/ruff format --check $(CHECKED)
	$(BIN)/lint-imports

check-types: $(VENV)/.test-installed
	$(BIN)/mypy

unit: $(VENV)/.test-installed
	$(BIN)/pytest -m "not integration"

# Everything on SQLite, then the API, store, lifecycle, TDS and pipelines tests, and the
# experiments' crash, halt and parallelism tests, again on PostgreSQL.
test: lint check-types sandbox-tools postgres-tools
	$(BIN)/pytest --durations=15
	LOOM_TEST_DB=postgres $(BIN)/pytest -m "not postgres" tests/api tests/store tests/lifecycle tests/tds \
		tests/hpo/test_experiments.py tests/pipelines -k "not test_experiments or kill9 or halt or goal or parallel"

# Known vulnerabilities in what is installed. Where PyPI's JSON API and osv.dev cannot be reached,
# ADVISORY_DB=<a checkout of github.com/pypa/advisory-database> audits against it on loopback.
audit: $(VENV)/.test-installed
	$(PIP) install pip-audit
	$(if $(ADVISORY_DB),$(BIN)/python tools/audit_offline.py $(ADVISORY_DB),$(BIN)/pip-audit) \
		--skip-editable --progress-spinner off

bench-launch: $(VENV)/.test-installed
	$(BIN)/python bench/launch.py

clean:
	rm -rf $(VENV) .loom-demo .pytest_cache .mypy_cache .ruff_cache
