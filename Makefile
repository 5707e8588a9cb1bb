# limno: every developer and CI entry point. `make help` lists them.
SHELL := /bin/bash
VENV := .venv
BIN := $(VENV)/bin

.PHONY: help setup quickstart test lint fast clean bench bench-quick kafka

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-12s %s\n", $$1, $$2}'

setup: ## create .venv and install limno with its dev dependencies (idempotent)
	@bash scripts/setup.sh

quickstart: setup ## set up, then run the quickstart on a fresh local lake (./quickstart-lake)
	@bash scripts/quickstart.sh

test: setup lint ## set up, then run ruff, mypy and the whole test suite (what CI runs)
	$(BIN)/pytest

fast: setup ## the test suite without slow, spark and kafka tests
	$(BIN)/pytest -m "not slow and not spark and not kafka"

lint: setup ## ruff, mypy and the layer contract (import-linter: dependencies point down)
	$(BIN)/ruff check src tests bench scripts
	$(BIN)/ruff format --check src tests bench scripts
	$(BIN)/mypy
	$(BIN)/lint-imports

kafka: setup ## a single-node Kafka broker (KRaft) in the foreground; prints its bootstrap address
	$(BIN)/python tests/kafka_support.py

bench: setup ## the benchmark suite, limno beside its peers (a few minutes; bench/results/)
	$(BIN)/python -m bench

bench-quick: setup ## the benchmark suite at tiny sizes (a smoke run, well under a minute)
	$(BIN)/python -m bench --quick

clean: ## remove the virtualenv, caches and the quickstart lake
	rm -rf $(VENV) .cache quickstart-lake .pytest_cache .mypy_cache .ruff_cache
