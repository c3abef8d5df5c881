"""What only the Snakefile uses: the pipeline's routing (:mod:`.plan`). Standard library only."""
