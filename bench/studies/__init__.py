"""Benches that measure without a pass or fail: comparisons, sweeps, studies of where time
and memory go."""
