# limno: every developer and CI entry point. `make help` lists them.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin
# The suite runs in TEST_WORKERS processes (pytest-xdist; 0: all in pytest's own): most
# of its time is spent waiting on servers, JVMs and browsers, which overlap. Each test
# file runs whole in one worker (--dist loadfile), so its module fixtures start once.
# The 25 slowest tests are listed at the end (CI logs show where the time goes).
TEST_WORKERS ?= 2
PYTEST_ARGS := -n $(TEST_WORKERS) --dist loadfile --durations=25

.PHONY: help setup quickstart test lint fast clean bench bench-quick kafka cdc-setup cdc-demo

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

setup: ## create .venv and install limno with its dev dependencies (idempotent)
	@bash scripts/setup.sh

quickstart: setup ## set up, then run the quickstart on a fresh local lake (./quickstart-lake)
	@bash scripts/quickstart.sh

test: setup cdc-setup lint ## set up, then run ruff, mypy and the whole test suite (what CI runs)
	$(BIN)/pytest $(PYTEST_ARGS)

fast: setup ## the test suite without slow, spark and kafka tests
	$(BIN)/pytest $(PYTEST_ARGS) -m "not slow and not spark and not kafka"

lint: setup ## ruff, mypy and the layer contract (import-linter: dependencies point down)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

kafka: setup ## a single-node Kafka broker (KRaft) in the foreground; prints its bootstrap address
	$(BIN)/python tests/kafka_support.py

cdc-setup: setup ## PostgreSQL (apt-get, when missing) and Kafka Connect with Debezium's connectors, for the CDC chain
	@bash scripts/postgres.sh
	@bash scripts/jars.sh connect

cdc-demo: cdc-setup ## Postgres -> Debezium -> Kafka -> limno kafka from/etl/kafka to -> JDBC sink -> Postgres, each hop printed
	$(BIN)/python tests/cdc_chain.py

bench: setup ## the benchmark suite, limno beside its peers (a few minutes; bench/results/)
	$(BIN)/python -m bench

bench-quick: setup ## the benchmark suite at tiny sizes (a smoke run, well under a minute)
	$(BIN)/python -m bench --quick

clean: ## remove the virtualenv, caches and the quickstart lake
	rm -rf $(VENV) .cache quickstart-lake .pytest_cache .mypy_cache .ruff_cache
