"""`python -m rebill.cli`: the crash tests start real billing runs this way."""

from rebill.cli import main

main()
