"""Layer 5, the command-line tools beside the CLI that are more than a query: `scalebench rehearse`
(the night's plan through the real DAGs on CPU stand-ins) and `scalebench repro` (a stored cell's
exact container, again)."""
