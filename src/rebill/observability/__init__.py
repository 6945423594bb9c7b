"""What an operator watches (issue 18): Prometheus figures (``metrics.py``), log lines as text or
JSON (``logs.py``), and the one-line hooks the request path and the jobs call (``record.py``).
docs/operations.md, "Metrics and logs", lists every figure and setting."""
