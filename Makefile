# Two commands do all set-up: `make demo` (the offline demo) and `make test` (the whole suite).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint docs bench clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m agentloop demo

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy

# The docs site (mkdocs.yml) must build without a warning; it is built to a temporary directory.
docs: $(STAMP)
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir "$$d"

test: lint docs
	$(BIN)/python -m pytest -q

bench: $(STAMP)
	$(BIN)/python bench/engine_turns.py

clean:
	rm -rf $(VENV)
