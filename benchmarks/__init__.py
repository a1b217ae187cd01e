"""slt benchmarks: accuracy against TRUTH.md and speed as ratios measured side by side.

`python -m benchmarks` (or `make bench`) runs every module in `SECTIONS` and writes RESULTS.md.
"""
