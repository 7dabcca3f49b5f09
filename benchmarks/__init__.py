"""GPU benchmarks and the scripts that run them on a GPU worker; run each from the repository root as
``python -m benchmarks.<name>``. What they measure lands in ``benchmarks/results/<track>/``
(``platform/`` for what is not one track's: `workshop.records.results_folder`)."""
