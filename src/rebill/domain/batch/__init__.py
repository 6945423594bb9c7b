"""Async batches (decisions §7.7, issue 15): many calls of one endpoint, run in the background."""
