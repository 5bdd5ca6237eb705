# The two commands a new user needs: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
# torch is pinned in pyproject's `torch` extra: unpinned, it pulls several GB of CUDA packages.
CHECKED := src tests bench examples

.PHONY: demo test lint check-types unit bench-launch audit sandbox-tools clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[torch,onnx]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[torch,s3,onnx,dev]'
	touch $@ $(VENV)/.demo-installed

# Learners run in a bubblewrap sandbox when the platform runs as root (Debian's package);
# elsewhere Loom serves one user only, and says so.
sandbox-tools:
	@if command -v bwrap >/dev/null; then :; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
		apt-get install -y -qq bubblewrap >/dev/null 2>&1 || \
		(apt-get update -qq >/dev/null && apt-get install -y -qq bubblewrap >/dev/null); \
	else echo "bubblewrap is not installed: jobs will not be sandboxed (see README)"; fi

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

test: lint check-types sandbox-tools
	$(BIN)/pytest

audit: $(VENV)/.test-installed
	$(BIN)/python -m pip install -q pip-audit
	$(BIN)/pip-audit --skip-editable

bench-launch: $(VENV)/.test-installed
	$(BIN)/python bench/launch.py

clean:
	rm -rf $(VENV) .loom-demo .pytest_cache .mypy_cache .ruff_cache
