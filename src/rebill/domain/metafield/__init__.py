"""Metafields: merchant data on another record (spec 02 Metafield, decisions §7.2, §7.6)."""
