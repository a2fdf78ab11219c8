"""`python -m zlbench.history`: the results store across runs: import, list, compare, regressions,
the cross-vendor table and a static site. Reads the store only (zlbench.store)."""
