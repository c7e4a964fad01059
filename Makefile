# obsgen: `make render` renders rules (and dashboards, docs); `make test` tests them.
# The first run creates .venv and installs obsgen with pinned dependencies.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
E2E_STAMP := $(VENV)/.installed-e2e
BENCH_STAMP := $(VENV)/.installed-bench
DOCS_STAMP := $(VENV)/.installed-docs
DIST_STAMP := $(VENV)/.installed-dist
TOOLS  := promtool vmalert amtool
E2E_TOOLS := $(TOOLS) prometheus prometheus-alertmanager victoria-metrics prometheus-node-exporter
TOOLS3 := promtool vmalert
E2E_TOOLS3 := promtool prometheus alertmanager prometheus-alertmanager amtool victoria-metrics vmalert vmalert-tool

.DEFAULT_GOAL := help
.PHONY: help render check test long docs dist e2e bench bench-scale bench-quick detect lint fuzz fixtures golden tools tools3 e2e-tools clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  make %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else "obsgen needs Python >= 3.11")'
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test]'
	@touch $@

# torch (CPU wheel, pinned in the torch extra) only for e2e and bench: make test stays light.
$(E2E_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,torch,dist,megatron,otel]'
	@touch $@

render: $(STAMP) tools ## render rules/ and docs/ from the definitions and obsgen.yaml (if present)
	$(BIN)/obsgen render

check: $(STAMP) ## fail when committed generated files are stale
	$(BIN)/obsgen check

tools: ## install promtool, vmalert, amtool (Debian prometheus, victoria-metrics, prometheus-alertmanager) when missing
	@scripts/ensure-tools.sh $(TOOLS)

# Prometheus 3's promtool beside Debian 12's 2.42, and vmalert 1.145 beside 1.79: from
# Debian's unstable suite on the machine's own mirror, checked against the archive keyring,
# unpacked into .tools/unstable (never over the system's). The promtool fixtures run on
# both Prometheus lines, the rendered rule files load in both vmalert lines.
tools3: ## unpack promtool 3.x and vmalert 1.145 from Debian unstable into .tools/unstable (never over the system's)
	@$(PYTHON) scripts/unstable-tools.py $(TOOLS3)

e2e-tools: tools3 ## install prometheus, prometheus-alertmanager, victoria-metrics and prometheus-node-exporter when missing; unpack today's (3.5, 0.33, 1.145) into .tools/unstable
	@scripts/ensure-tools.sh $(E2E_TOOLS)
	@$(PYTHON) scripts/unstable-tools.py $(E2E_TOOLS3)

# The test files that run promtool on whole suites of rendered scenarios: make test's
# second pytest stage. Every other test file runs in the first.
PROMTOOL_TESTS := tests/test_promtool.py tests/test_scenarios.py tests/test_starters.py tests/test_shards.py \
	tests/test_boundaries.py tests/test_late_reads.py

test: $(DOCS_STAMP) tools tools3 ## staleness check, docs build, unit tests, promtool fixtures and scenarios, in timed stages, unit and promtool side by side (~4 min on 2 cores)
	@scripts/stages.sh \
	  "generated files are current (obsgen check)" "$(BIN)/obsgen check" \
	  "docs site builds (mkdocs --strict)" "NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict -q" \
	  "+unit tests" "$(BIN)/pytest -q -p no:cacheprovider $(foreach f,$(PROMTOOL_TESTS),--ignore=$(f))" \
	  "promtool fixtures, scenarios and starters" "$(BIN)/pytest -q -p no:cacheprovider $(PROMTOOL_TESTS)"

long: $(STAMP) tools ## what make test leaves out for time (CI runs it): every scenario under --boundaries, 3 random configs' scenarios, the fixtures rebuilt from their case tables, the user's CI loop, the reference-rule mutants, Megatron's cadences, 200 examples of each property (fixed seeds)
	@scripts/stages.sh \
	  "+long tests: --boundaries, random configs' scenarios, fixtures from their case tables, the user's CI loop, the reference-rule mutants" "$(BIN)/pytest -q -p no:cacheprovider -m long" \
	  "properties, 200 examples each" "OBSGEN_EXAMPLES=200 $(BIN)/pytest -q -p no:cacheprovider tests/test_properties.py"

# build (pinned in the dist extra) only for the wheel and the sdist.
$(DIST_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,dist]'
	@touch $@

dist: $(DIST_STAMP) ## build the wheel and the sdist into dist/: pip install dist/obsgen-*.whl in your repository
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# mkdocs and the Material theme (pinned in the docs extra) only for the docs site.
$(DOCS_STAMP): $(STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,docs]'
	@touch $@

docs: $(DOCS_STAMP) ## build the docs site from docs/ into site/ (--strict: a broken link or anchor fails)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

fuzz: $(STAMP) tools ## property tests with fresh randomness: 5,000 examples each (make test: 10, make long: 200), 40 random configs of rendered scenarios (make long: 3)
	OBSGEN_FUZZ=1 $(BIN)/pytest -q -p no:cacheprovider -m 'not e2e' tests/test_properties.py tests/test_scenario_properties.py

e2e: $(E2E_STAMP) e2e-tools check ## end to end on today's Prometheus 3.5, Alertmanager 0.33, VictoriaMetrics 1.145 (the simulator and PyTorch jobs), the simulator's scenarios again on Debian 12's 2.42
	@scripts/stages.sh \
	  "live: Prometheus 3.5, Alertmanager 0.33, VictoriaMetrics and vmalert 1.145 (.tools/unstable)" "OBSGEN_E2E_TOOLS=.tools/unstable/bin $(BIN)/pytest -q -p no:cacheprovider -m e2e tests/e2e" \
	  "live: the simulator's scenarios on Prometheus 2.42, Alertmanager 0.25, VictoriaMetrics 1.79 (Debian 12)" "$(BIN)/pytest -q -p no:cacheprovider -m e2e tests/e2e/test_scenarios.py tests/e2e/test_vm_parity.py" \
	  "scale benchmark at 256 ranks" "$(BIN)/python -m benchmarks.scale --quick"


lint: $(STAMP) tools ## promtool check rules --lint=all on the rendered rules
	promtool check rules --lint=all rules/*.yaml

fixtures: $(STAMP) ## regenerate tests/promtool/*.yaml from the case tables
	$(BIN)/python -m tests.promtool.build

golden: $(STAMP) ## refresh golden files after an intended change
	UPDATE_GOLDEN=1 $(BIN)/pytest -q tests/test_render.py tests/test_dashboards.py tests/test_targets.py tests/test_presets.py tests/test_alertmanager.py

# matplotlib (pinned in the bench extra) for the scale benchmark's plot.
$(BENCH_STAMP): $(E2E_STAMP)
	$(BIN)/pip install --quiet --disable-pip-version-check -e '.[test,torch,bench]'
	@touch $@

bench: $(BENCH_STAMP) e2e-tools ## benchmarks: NCCL sidecar parse rate, instrument overhead, straggler detection, rules and panels at 1k-16k ranks, the shard tier of a sharded render at 16k, its centre at 131k (~2.5 h)
	$(BIN)/python -m benchmarks.nccl_parse
	$(BIN)/python -m benchmarks.detect
	$(BIN)/python benchmarks/instrument_overhead.py
	$(BIN)/python -m benchmarks.scale
	$(BIN)/python -m benchmarks.sharded
	$(BIN)/python -m benchmarks.central

bench-scale: $(BENCH_STAMP) e2e-tools ## only the scale benchmarks: benchmarks/RESULTS.md, SHARDED.md and scale.png
	$(BIN)/python -m benchmarks.scale
	$(BIN)/python -m benchmarks.sharded
	$(BIN)/python -m benchmarks.central

detect: $(STAMP) tools ## straggler detection: localization, latency, benign behaviours, a 24-hour soak, misroutes, episodes (benchmarks/DETECTION.md, ~15 min)
	$(BIN)/python -m benchmarks.detect

bench-quick: $(STAMP) e2e-tools ## the scale benchmark at 256 ranks (< 3 min; make e2e runs it)
	$(BIN)/python -m benchmarks.scale --quick

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .hypothesis *.egg-info dist
