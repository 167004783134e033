"""srv6pm's benchmarks: one script per benchmark over one shared harness (bench/harness).

Run one as root from the repository root with ``python3 -m bench.<name>`` or
``python3 bench/<name>.py``; ``--help`` lists its knobs and ``--quick`` is a smoke run. Each
run writes bench/results/<run id>.json, the run id being ``<benchmark>-YYYYMMDD-HHMMSS``.
Methods and figures: docs/BENCHMARKS.md.
"""
