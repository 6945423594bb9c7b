"""Bundles: bundle variants (a Rebill extension) and the bundle selections of purchase items
(issue 15)."""
