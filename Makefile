# Two commands do all set-up: `make demo` (the offline demo) and `make test` (the whole suite, the
# CI). `make check` is the inner loop: lint, types and the fast tests, nothing from npm or apt.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo-installed
# The reference MCP filesystem server two end-to-end tests start (tests/test_mcp_e2e.py), pinned and
# installed locally under .ci/node (skipped when that exact version is already there).
FS_SERVER := @modelcontextprotocol/server-filesystem@2026.8.31
FS_INSTALLED := .ci/node/node_modules/@modelcontextprotocol/server-filesystem/package.json

.PHONY: demo test check lint docs bench bench-guard bench-baseline bench-peers clean mcp-server ui-deps

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The demo needs only rich (the cli extra), not the dev tools: its own stamp, a small install.
$(DEMO_STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[cli]'
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(BIN)/python -m agentloop demo

mcp-server:
	@[ "$${AGENTLOOP_SKIP_NPM:-}" = 1 ] || \
	grep -q '"version": "$(lastword $(subst @, ,$(FS_SERVER)))"' $(FS_INSTALLED) 2>/dev/null || \
	npm install --prefix .ci/node --save-exact --no-audit --no-fund --silent "$(FS_SERVER)" || \
	{ echo "make: installing $(FS_SERVER) with npm failed (is npm installed, the registry" \
	"reachable?); AGENTLOOP_SKIP_NPM=1 make test skips the two tests that start it" >&2; exit 1; }

# The real clients the UI tests drive (SPEC 18): @ag-ui/client and the ai package under
# tests/ui/node, and Debian's chromium + chromedriver for the run viewer (installed with apt when
# missing and run as root; otherwise the browser tests skip and print why).
UI_NODE := tests/ui/node
ui-deps:
	@[ "$${AGENTLOOP_SKIP_NPM:-}" = 1 ] || [ -d $(UI_NODE)/node_modules/ai ] || \
	npm install --prefix $(UI_NODE) --no-audit --no-fund --silent || \
	{ echo "make: npm install in $(UI_NODE) failed; AGENTLOOP_SKIP_NPM=1 make test skips it" >&2; exit 1; }
	@command -v chromedriver >/dev/null || \
	{ [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null || \
	  { echo "make: chromium is not installed and only root with apt-get installs it here;" \
	  "the browser tests will skip, saying why" >&2; exit 0; }; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null || \
	{ apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null; } || \
	echo "make: could not install chromium with apt; the browser tests will skip, saying why" >&2; }

lint: $(STAMP)
	$(BIN)/ruff check src tests bench examples
	$(BIN)/ruff format --check src tests bench examples
	$(BIN)/mypy

# The docs site (mkdocs.yml) must build without a warning; it is built to a temporary directory.
docs: $(STAMP)
	d=$$(mktemp -d) && trap 'rm -rf "$$d"' EXIT && \
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir "$$d"

# -rs: every skipped test says why (no chromium, no node, no local model server, ...). -n auto: one
# pytest-xdist worker per core; every test owns its ports, directories and throwaway servers.
test: lint docs mcp-server ui-deps
	$(BIN)/python -m pytest -q -rs -n auto

# The inner loop, under 2 minutes here: lint, types, and the suite without its slow parts, which
# `make test` runs: the durable workers (DBOS, Temporal), MCP servers started as processes, every
# docs example and example script in a fresh interpreter, the secret scans, mypy over the typing
# cases, the CLI's pausing and crash tests and the evals' CLI tests in subprocesses, the
# benchmarks' smoke runs, and the browsers. It installs nothing from npm or apt: the tests that
# need node skip, saying why.
CHECK_SKIP := --ignore=tests/durable --ignore=tests/test_docs.py --ignore-glob='tests/test_mcp*.py' \
	--ignore=tests/test_secrets.py --ignore=tests/test_typing.py --ignore=tests/test_cli_pausing.py \
	--ignore=tests/test_examples.py --ignore=tests/pausing/test_pause_crash.py \
	--ignore=tests/ui/test_viewer_browser.py --ignore=tests/evals/test_report_browser.py \
	--ignore=tests/evals/test_cli_evals.py --ignore=tests/evals/test_cassettes_durable.py \
	--ignore=tests/test_bench_smoke.py --ignore=tests/fleet/test_bench_fleet_smoke.py
check: lint
	$(BIN)/python -m pytest -q -rs -n auto $(CHECK_SKIP)

bench: $(STAMP)
	$(BIN)/python bench/engine_turns.py

bench-guard: $(STAMP)
	$(BIN)/python bench/instruction_guard.py

bench-baseline: $(STAMP)
	$(BIN)/python bench/instruction_guard.py --update

# agentloop against raw aiohttp, the openai SDK, pydantic-ai, openai-agents and LangGraph on one
# fake server (docs/benchmarks.md). The peers live in their own venv, from exact pins, never in
# .venv; this tree's agentloop is reinstalled there on every run. `make bench-peers
# PEERS_ARGS=--quick` for a short run that leaves the docs alone.
PEERS_VENV := bench/peers/.venv
PEERS_STAMP := $(PEERS_VENV)/.installed
PEERS_ARGS ?=
$(PEERS_STAMP): bench/peers/requirements.txt
	$(PYTHON) -m venv $(PEERS_VENV)
	$(PEERS_VENV)/bin/pip install -q --upgrade pip
	$(PEERS_VENV)/bin/pip install -q -r bench/peers/requirements.txt '.[cli]'
	touch $(PEERS_STAMP)

bench-peers: $(PEERS_STAMP)
	$(PEERS_VENV)/bin/pip install -q --no-deps --force-reinstall .
	$(PEERS_VENV)/bin/python bench/peers/run.py $(PEERS_ARGS)

clean:
	rm -rf $(VENV)
