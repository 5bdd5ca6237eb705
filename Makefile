# The two commands a new user needs: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
# uv, from the machine's pip configuration, compiled as pip would (tools/uvpip.py): seconds, not
# minutes. Loom's venv is compiled: learners and replicas see it read-only and could not cache it.
UVPIP := $(BIN)/python tools/uvpip.py --compile
# torch is pinned in pyproject's `torch` extra: unpinned, it pulls several GB of CUDA packages.
CHECKED := src tests bench examples tools

.PHONY: demo test check lint check-types unit bench-launch audit sandbox-tools postgres-tools \
	proxy-tools browser-tools ui ui-if-node foreign-clients clean

# The pip a venv starts with may be older than its security fixes (23.2.1: PYSEC-2023-228).
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade 'pip>=23.3' 'uv>=0.13,<0.14'

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(UVPIP) -- -e '.[torch,onnx]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(UVPIP) -- -e '.[torch,s3,onnx,postgres,ray,kubernetes,dev,xgboost,explain]'
	touch $@ $(VENV)/.demo-installed

# Learners run in a bubblewrap sandbox when the platform runs as root (Debian's package);
# elsewhere Loom serves one user only, and says so.
sandbox-tools:
	@if command -v bwrap >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null); \
	else echo "bubblewrap is not installed: jobs will not be sandboxed (see docs/security.md)"; fi

# Deployments' requests go through HAProxy (Debian's) where it is installed; without it each
# deployment's gateway answers them itself (slower), and says so in its log.
proxy-tools:
	@if command -v haproxy >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq haproxy >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null && apt-get install -y -qq haproxy >/dev/null); \
	else echo "haproxy is not installed: deployments are served by their gateways alone"; fi

# The tests start a throw-away PostgreSQL server of their own from Debian's binaries.
postgres-tools:
	@if ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || command -v initdb >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq postgresql >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null && apt-get install -y -qq postgresql >/dev/null); \
	else echo "PostgreSQL is not installed: install it (apt-get install postgresql)"; exit 1; fi

# The web UI, built from ui/ (its packages from npm, pinned by ui/package-lock.json) into
# src/loom/ui/static, where the API server serves it and the wheel takes it from.
UI_SOURCES := $(shell find ui -path ui/node_modules -prune -o -type f -print 2>/dev/null)
src/loom/ui/static/index.html: $(UI_SOURCES)
	cd ui && npm ci --no-audit --no-fund --loglevel=error && node build.mjs

ui: src/loom/ui/static/index.html

# Without Node.js the demo runs without its UI (the API, CLI and everything else work).
ui-if-node:
	@if command -v npm >/dev/null; then $(MAKE) --no-print-directory ui; \
	else echo "npm is not installed: the web UI is not built (apt-get install nodejs npm)"; fi

# The browser tests drive Debian's chromium through Playwright (no browser download).
browser-tools:
	@if command -v chromium >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq chromium >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null && apt-get install -y -qq chromium >/dev/null); \
	else echo "chromium is not installed: install it (apt-get install chromium)"; exit 1; fi

# Foreign clients the dialects' tests drive for real, each in a venv of its own (tests/venvs.py
# makes the same one, with the same marker, when a test needs it and it is not there).
.venvs/kfp/.installed: | $(BIN)/python
	$(PYTHON) -m venv --clear --without-pip .venvs/kfp
	$(BIN)/python tools/uvpip.py --python .venvs/kfp/bin/python kfp==2.17.3
	printf 'kfp==2.17.3\n' > $@

# MLflow's server (the differential test's oracle) and stock client: tools/foreign.py.
foreign-clients: .venvs/kfp/.installed
	$(BIN)/python -m tools.foreign

demo: $(VENV)/.demo-installed sandbox-tools proxy-tools ui-if-node
	$(BIN)/python examples/demo.py

lint: $(VENV)/.test-installed
	$(BIN)/ruff check $(CHECKED)
	$(BIN)/ruff format --check $(CHECKED)
	$(BIN)/lint-imports

check-types: $(VENV)/.test-installed
	$(BIN)/mypy

unit: $(VENV)/.test-installed
	$(BIN)/pytest -m "not integration"

# The inner loop (a few minutes): lint, types, import contracts and the unit tests, no servers.
check: $(VENV)/.test-installed
	$(BIN)/python tools/test_tiers.py check

# Everything: the above, the UI's own tests, every integration test on SQLite (in parallel over
# the cores), the tests whose behaviour depends on the database again on PostgreSQL (marker
# `db`) with the browser tests beside them. It ends with a summary: each tier's tests, time and
# cores, the slowest 15 tests and the failed ones.
test: $(VENV)/.test-installed sandbox-tools proxy-tools postgres-tools browser-tools ui \
	foreign-clients
	$(BIN)/python tools/test_tiers.py test

# Known vulnerabilities in what is installed. Where PyPI's JSON API and osv.dev cannot be reached,
# ADVISORY_DB=<a checkout of github.com/pypa/advisory-database> audits against it on loopback.
audit: $(VENV)/.test-installed
	$(PIP) install pip-audit
	$(if $(ADVISORY_DB),$(BIN)/python tools/audit_offline.py $(ADVISORY_DB),$(BIN)/pip-audit) \
		--skip-editable --progress-spinner off

bench-launch: $(VENV)/.test-installed
	$(BIN)/python bench/launch.py

clean:
	rm -rf $(VENV) .venvs .loom-demo .pytest_cache .mypy_cache .ruff_cache ui/node_modules src/loom/ui/static
