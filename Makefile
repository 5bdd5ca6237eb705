# The two commands a new user needs: `make demo` and `make test`. Both create .venv themselves.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PIP := $(BIN)/python -m pip --disable-pip-version-check -q
# torch is pinned in pyproject's `torch` extra: unpinned, it pulls several GB of CUDA packages.
CHECKED := src tests bench examples

.PHONY: demo test lint check-types unit bench-launch clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.demo-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[torch,onnx]'
	touch $@

$(VENV)/.test-installed: pyproject.toml | $(BIN)/python
	$(PIP) install -e '.[torch,s3,onnx,dev]'
	touch $@ $(VENV)/.demo-installed

demo: $(VENV)/.demo-installed
	$(BIN)/python examples/demo.py

lint: $(VENV)/.test-installed
	$(BIN)/ruff check $(CHECKED)
	$(BIN)/ruff format --check $(CHECKED)
	$(BIN)/lint-imports

check-types: $(VENV)/.test-installed
	$(BIN)/mypy

unit: $(VENV)/.test-installed
	$(BIN)/pytest -m "not integration"

test: lint check-types
	$(BIN)/pytest

bench-launch: $(VENV)/.test-installed
	$(BIN)/python bench/launch.py

clean:
	rm -rf $(VENV) .loom-demo .pytest_cache .mypy_cache .ruff_cache
