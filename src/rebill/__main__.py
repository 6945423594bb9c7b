"""`python -m rebill`: the command line, as `rebill` (found by an audit: only `python -m
rebill.cli` ran)."""

from rebill.cli import main

main()
