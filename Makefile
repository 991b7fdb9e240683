PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEVSTAMP := $(VENV)/.installed-dev

.PHONY: demo test lint bench system-deps clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e .
	touch $@

$(DEVSTAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev,runtime,frameworks]'
	touch $@

demo: $(STAMP)
	$(BIN)/tierwise demo --out tierwise-report.html

system-deps:
	bash scripts/install-system-deps.sh

test: $(DEVSTAMP) system-deps
	$(BIN)/python -m pytest

lint: $(DEVSTAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/ruff format --check src tests benchmarks

bench: $(STAMP)
	@for f in benchmarks/*.py; do echo "== $$f"; $(BIN)/python $$f; done

clean:
	rm -rf $(VENV) build dist .pytest_cache
