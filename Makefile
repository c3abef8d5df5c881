# speechprep: the two commands of the README.
#   make demo   set up everything (idempotent) and run the demo pipeline
#   make test   set up everything (idempotent) and run the test suite
.PHONY: setup demo test bench lint clean

setup:
	bash scripts/setup.sh

demo: setup
	.venvs/workflow/bin/snakemake --profile profiles/local

test: setup
	bash scripts/run_tests.sh

lint: setup
	.venvs/workflow/bin/snakemake --lint

clean:
	rm -rf results .snakemake
