"""Benches with a target an issue set: each prints its figures beside their targets and
exits non-zero when one is missed (`make bench` runs them)."""
