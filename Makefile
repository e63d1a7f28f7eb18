# mlfabric: make help lists the targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
MLFABRIC := $(VENV)/bin/mlfabric
PYTEST_ARGS ?=
TARGET ?= $(or $(MLFABRIC_TARGET),python)
# the Python target's packet engine for every switch process (mlfabric-switch --engine)
ENGINE ?= $(or $(MLFABRIC_ENGINE),auto)
export MLFABRIC_ENGINE := $(ENGINE)

.DEFAULT_GOAL := help
.PHONY: help setup run run-smoke run-rail-only run-checkmate run-rotor run-tdtcp run-topoopt run-collectives run-aggregation model-rail-only test test-unit test-target test-emulation p4 bench p4c-samples lint typecheck docs doctor clean-net clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  make %-16s %s\n", $$1, $$2}' $(MAKEFILE_LIST)
	@echo "  variables: TARGET=python|bmv2 (switch target), ENGINE=auto|native|python (the Python target's"
	@echo "             packet engine), PYTEST_ARGS=..., EXPERIMENT_ARGS=..."

setup: ## install Debian packages, the virtual environment and Python dependencies (idempotent)
	@tools/bootstrap.sh

run: run-rail-only ## the main job: the rail-only experiment (alias of run-rail-only)

run-rail-only: setup ## rail-only vs fat-tree in Mininet: collectives, table, plot, CSV in results/
	@$(MLFABRIC) experiment run rail-only --target $(TARGET) $(EXPERIMENT_ARGS)

run-checkmate: setup ## Checkmate vs CheckFreq and Gemini: checkpoint frequency within a 5% budget, replica, recovery
	@$(MLFABRIC) experiment run checkmate --target $(TARGET) $(EXPERIMENT_ARGS)

run-rotor: setup ## round-robin optical fabric: throughput vs slice/duty cycle, direct vs VLB, calendar-queue delay, ring all-reduce
	@$(MLFABRIC) experiment run rotor --target $(TARGET) $(EXPERIMENT_ARGS)

run-tdtcp: setup ## TDTCP: per-TDN transport vs one shared state vs kernel CUBIC across alternating fast/slow TDNs
	@$(MLFABRIC) experiment run tdtcp --target $(TARGET) $(EXPERIMENT_ARGS)

run-topoopt: setup ## TopoOpt co-optimized vs TotientPerms only and fat-trees of equal cost and bandwidth, on two jobs
	@$(MLFABRIC) experiment run topoopt --target $(TARGET) $(EXPERIMENT_ARGS)

run-collectives: setup ## Open MPI's allreduce and all-to-all (default and forced ring) vs mlfabric's collectives and the model, rail-only and fat-tree
	@$(MLFABRIC) experiment run collectives --target $(TARGET) $(EXPERIMENT_ARGS)

run-aggregation: setup ## in-network aggregation (SwitchML) in the rail switches vs the ring and hierarchical all-reduce, rail-only and fat-tree, with loss
	@$(MLFABRIC) experiment run aggregation --target $(TARGET) $(EXPERIMENT_ARGS)

model-rail-only: setup ## the analytical cost/power and iteration-time model: tables and plots in results/
	@$(MLFABRIC) experiment model rail-only

run-smoke: setup ## the Mininet smoke run: pipeline, rules and a ping between two hosts
	@$(MLFABRIC) smoke --target $(TARGET)

test: setup lint typecheck ## lint and type checks, then every test tier this machine can run (unit and packet-level on 4 workers, the emulation tier serially, its engine-dependent tests on both engines); prints why a tier is skipped
	@if [ -n "$(PYTEST_ARGS)" ]; then MLFABRIC_TARGET=$(TARGET) $(PY) -m pytest --durations=15 $(PYTEST_ARGS); else \
		MLFABRIC_TARGET=$(TARGET) $(PY) -m pytest -n 4 --durations=10 -m "not emulation" && \
		MLFABRIC_TARGET=$(TARGET) $(PY) -m pytest --durations=15 -m emulation; fi
	@if [ "$(TARGET)" = python ] && [ "$(ENGINE)" = auto ] && [ -z "$(PYTEST_ARGS)" ]; then \
		echo "make test: the emulation tests marked both_engines again, every switch on the Python engine (the fallback)"; \
		MLFABRIC_ENGINE=python MLFABRIC_TARGET=python $(PY) -m pytest --durations=10 -m "emulation and both_engines"; \
	fi

test-unit: setup ## only the unit tier
	@MLFABRIC_TARGET=$(TARGET) $(PY) -m pytest -m unit $(PYTEST_ARGS)

test-target: setup ## only the packet-level tier on TARGET
	@MLFABRIC_TARGET=$(TARGET) $(PY) -m pytest -m target $(PYTEST_ARGS)

test-emulation: setup ## only the Mininet tier (root)
	@MLFABRIC_TARGET=$(TARGET) $(PY) -m pytest -m emulation $(PYTEST_ARGS)

p4: setup ## recompile every P4 program with p4c-bm2-ss and rewrite the manifests
	@$(MLFABRIC) p4 compile

bench: setup ## run the benchmarks, each section timed (BENCH=section to run one: compile, forwarding, data-path, ...; BENCH=engines runs only when named); writes bench/results/*.json
	@$(PY) -m bench $(if $(BENCH),--section $(BENCH)) $(BENCH_ARGS)

p4c-samples: setup ## differential check of p4c's v1model samples on BMv2 and the Python target (root; P4C_SRC=p4c checkout)
	@if [ -z "$(P4C_SRC)" ]; then echo "set P4C_SRC to a p4c source checkout (its testdata/p4_16_samples)"; exit 2; fi
	@$(PY) -m bench.p4c_samples --p4c $(P4C_SRC) $(P4C_ARGS)

lint: setup ## ruff (make test runs it first)
	@$(VENV)/bin/ruff check mlfabric_base controller pybmv2 packettest workloads tests bench mininet

typecheck: setup ## mypy (make test runs it first)
	@$(VENV)/bin/mypy

docs: setup ## regenerate docs/cli.md, the CLI reference, from the argparse tree (a test fails when it is stale)
	@$(PY) -m controller.cli.reference

doctor: setup ## report the toolchain, Mininet and qdiscs this machine has
	@$(MLFABRIC) doctor

clean-net: ## remove what crashed runs left (links, namespaces, switch processes); CLEAN_ARGS=--force: live runs too
	@if [ -x $(MLFABRIC) ]; then $(MLFABRIC) clean-net $(CLEAN_ARGS); else echo "nothing to clean: no virtual environment"; fi

clean: clean-net ## remove the virtual environment and caches
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
