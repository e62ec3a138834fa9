"""The DAGs: their builders and every task at module level, and what only the tasks use (the typed
run parameters, alerts, the bisect steps)."""
