# speechprep: the two commands of the README, and the development loop.
#   make demo       set up everything (idempotent) and run the demo pipeline
#   make test       set up everything (idempotent) and run the whole test suite
#   make test-fast  unit tests and a dry run of the workflow (no model training, no real runs)
#   make lint       ruff (lint + format check), snakefmt, snakemake --lint
.PHONY: setup demo test test-fast lint format clean

BIN := .venvs/workflow/bin

setup:
	bash scripts/setup.sh

demo: setup
	$(BIN)/snakemake --profile profiles/local

test: setup
	bash scripts/run_tests.sh

test-fast: setup
	bash scripts/run_tests.sh -m "not slow"

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint

format: setup
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .
	$(BIN)/snakefmt Snakefile rules

clean:
	rm -rf results .snakemake
