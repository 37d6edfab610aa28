PY ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | sha1sum | cut -c1-12)
RESTATE_VERSION := 1.7.12
RESTATE_STAMP := $(VENV)/restate/.installed-$(RESTATE_VERSION)

.PHONY: demo test install screenshots docs bench bench-adapters bench-alerts bench-native-waits bench-profile bench-recovery chaos clean

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install -q -e '.[dev,dbos,temporal,langgraph,restate,postgres]'
	rm -f $(VENV)/.installed-*
	touch $(STAMP)

# the Restate server binary from npm, project-local (backend_adapters/restate/dev_server.py);
# --ignore-scripts and SCARF_ANALYTICS=false: no install-time telemetry
$(RESTATE_STAMP): $(BIN)/python
	SCARF_ANALYTICS=false DO_NOT_TRACK=1 npm install -s --no-audit --no-fund --ignore-scripts \
	  --prefix $(VENV)/restate @restatedev/restate-server@$(RESTATE_VERSION)
	touch $(RESTATE_STAMP)

install: $(STAMP) $(RESTATE_STAMP)

demo: $(STAMP) $(RESTATE_STAMP)
	$(BIN)/irq demo

# three workers: most tests wait on real servers, not the CPU (tests/conftest.py groups a
# file's tests, and the live fleet's, on one worker)
test: $(STAMP) $(RESTATE_STAMP)
	$(BIN)/ruff check console backend_adapters devtools tests benchmarks tools
	$(BIN)/mypy console backend_adapters devtools
	$(BIN)/python -m pytest -q -x -p no:cacheprovider --durations=25 -n 3 --dist loadgroup

screenshots: $(STAMP)
	@command -v rsvg-convert >/dev/null || (apt-get install -y -q librsvg2-bin >/dev/null 2>&1 \
	  || echo "rsvg-convert unavailable: writing SVG only" >&2)
	$(BIN)/python -m tools.screenshots --out screenshots

# docs/cli-reference.md from the typer app in console/cli (never by hand: tests/unit/test_docs.py
# fails when it and the code disagree)
docs: $(STAMP)
	$(BIN)/python -m tools.cli_reference --out docs/cli-reference.md

# the gateway's fast path, the TUI, the command line and two gateways (under 10 minutes), then
# the scale table of the whole run: scale_table.py refuses a results file written before this
# run started (BENCH_START), writes results/gateway.json (gateway_scale.json's figures, the
# table, the previous run's table), rewrites README.md's table and prints it
bench: BENCH_START := $(shell date +%s)
bench: $(STAMP)
	$(BIN)/python benchmarks/gateway_scale.py  # -> benchmarks/results/gateway_scale.json
	$(BIN)/python benchmarks/tui_render.py  # 80x24 and 200x50 -> benchmarks/results/tui.json
	$(BIN)/python benchmarks/cli_startup.py  # -> results/cli.json
	$(BIN)/python benchmarks/gateway_peers.py  # two gateways, one PostgreSQL -> results/peers.json
	$(BIN)/python benchmarks/scale_table.py --since $(BENCH_START)  # -> results/gateway.json, README.md

# each adapter and the policy guard against their real servers (a 1,000-workflow Temporal
# fleet takes minutes to start: 15-25 minutes in all)
# Each writes benchmarks/results/<script>.json; temporal_dead_worker.json keeps one entry per
# --poll/--rps variant.
bench-adapters: $(STAMP) $(RESTATE_STAMP)
	$(BIN)/python benchmarks/temporal_observe.py
	$(BIN)/python benchmarks/policy_guard.py
	$(BIN)/python benchmarks/temporal_dead_worker.py
	$(BIN)/python benchmarks/temporal_dead_worker.py --poll 0.5
	$(BIN)/python benchmarks/temporal_dead_worker.py --poll 0.1 --rps 20 --trials 3
	$(BIN)/python benchmarks/temporal_dead_worker.py --poll 0.1 --rps 2 --trials 2
	$(BIN)/python benchmarks/dbos_adapter.py
	$(BIN)/python benchmarks/restate_hang.py
	$(BIN)/python benchmarks/langgraph_inbox.py

# where the gateway's time goes, under pyinstrument (its own cost tips the gateway over): the
# profile docs/performance.md cites; the run's figures go to /dev/null, not over gateway_scale.json
bench-profile: $(STAMP)
	$(BIN)/python benchmarks/gateway_scale.py --clients 1,10 --seconds 10 \
	  --profile benchmarks/results/gateway-profile.txt --out /dev/null
	$(BIN)/python benchmarks/gateway_ingest.py  # the hub's cost per beat, in process
	$(BIN)/python benchmarks/gateway_ingest.py --general
	$(BIN)/python benchmarks/gateway_ingest.py --set-order
	$(BIN)/python benchmarks/gateway_ingest.py --gpu  # beats reporting a GPU held
	$(BIN)/python benchmarks/gateway_ingest.py --gpu --general
	$(BIN)/python benchmarks/beat_floor.py  # the least a beat can cost, and the baseline's own

# agents waiting in their backend's own idiom (no irq import), 1,000 of them per backend: how
# soon each wait shows up in the inbox and what polling costs (about 2-3 minutes each)
bench-native-waits: $(STAMP) $(RESTATE_STAMP)
	$(BIN)/python benchmarks/native_waits_temporal.py  # -> benchmarks/results/native_waits_temporal.json
	$(BIN)/python benchmarks/native_waits_dbos.py  # -> results/native_waits_dbos.json
	$(BIN)/python benchmarks/native_waits_langgraph.py  # -> results/native_waits_langgraph.json
	$(BIN)/python benchmarks/native_waits_restate.py  # -> results/native_waits_restate.json

# alerts at 10,000 beating runs: condition begins -> alert visible / webhook delivered per kind,
# the evaluator's cost per tick, raised once; then the polling cost of the backend-side alert
# facts against real Temporal, Restate and DBOS (about 6 minutes): benchmarks/results/alerts.json
bench-alerts: $(STAMP) $(RESTATE_STAMP)
	$(BIN)/python benchmarks/alerts.py

# a bulk retry of 1,000 failed runs as one job on DBOS and Temporal, against a warm client
# loop and the temporal CLI's batch reset, and the job's gateway SIGKILLed halfway (two on one
# PostgreSQL journal): benchmarks/results/bulk_retry.json + a table (about 15 minutes)
bench-recovery: $(STAMP)
	$(BIN)/python benchmarks/bulk_retry.py

# fuzzed frames, silent connections, a SIGKILL storm of gateways (two on one PostgreSQL
# journal) against real DBOS and Temporal agents: benchmarks/results/chaos.json + a table
chaos: $(STAMP)
	$(BIN)/python benchmarks/chaos.py

clean:
	rm -rf $(VENV)
