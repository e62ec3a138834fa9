"""Layer 3: statistics, regression detection, history series, run comparison and rerun planning.
Works on rows it is handed (never opens the store itself); imports `core` and `cell`."""
