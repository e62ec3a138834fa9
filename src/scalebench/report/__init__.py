"""Layer 4: the nightly report, computed once as data, then rendered (Markdown, HTML, plots)."""
