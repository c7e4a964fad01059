# obsgen: `make render` renders rules (and dashboards, docs); `make test` tests them.
# The first run creates .venv and installs obsgen with pinned dependencies.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TOOLS  := promtool vmalert
# Grafana's dashboard JSON schemas, beside the repository; renders validate against them.
# (A git worktree sits one level deeper: look beside its parent too.)
GRAFANA_SCHEMAS := $(firstword $(wildcard $(abspath ../shared/schemas/grafana) $(abspath ../../shared/schemas/grafana)))
ifneq ($(wildcard $(GRAFANA_SCHEMAS)/dashboard.jsonschema.json),)
export OBSGEN_GRAFANA_SCHEMAS := $(GRAFANA_SCHEMAS)
endif

.DEFAULT_GOAL := help
.PHONY: help render check test lint fuzz fixtures golden tools bench clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "obsgen needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

render: $(STAMP) tools ## render rules/ and docs/ from the definitions and obsgen.yaml (if present)
	$(BIN)/obsgen render

check: $(STAMP) ## fail when committed generated files are stale
	$(BIN)/obsgen check

tools: ## install promtool and vmalert (Debian prometheus, victoria-metrics) when missing
	@scripts/ensure-tools.sh $(TOOLS)

test: $(STAMP) tools check ## staleness check, unit tests, promtool checks and fixtures
	$(BIN)/pytest -q

fuzz: $(STAMP) tools ## property tests with 5,000 random examples each (make test runs 200)
	OBSGEN_FUZZ=1 $(BIN)/pytest -q -p no:cacheprovider tests/test_properties.py

lint: $(STAMP) tools ## promtool check rules --lint=all on the rendered rules
	promtool check rules --lint=all rules/*.yaml

fixtures: $(STAMP) ## regenerate tests/promtool/*.yaml from the case tables
	$(BIN)/python -m tests.promtool.build

golden: $(STAMP) ## refresh golden files after an intended change
	UPDATE_GOLDEN=1 $(BIN)/pytest -q tests/test_render.py tests/test_dashboards.py

bench: $(STAMP) ## benchmarks: NCCL sidecar parse throughput and memory bound
	$(BIN)/python -m benchmarks.nccl_parse

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info
