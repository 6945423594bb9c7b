"""Rebill: a self-hostable subscription billing service (API versions 2021-01 and 2021-11)."""

__version__ = "0.1.0"
