"""The keys a text that is unique case-insensitively is stored and found by: a discount code
(decisions §7.5), a customer's e-mail (spec 02 Customers, "unique per store").

A text and its key: Unicode NFC, trimmed, lower-cased, so that `É` typed as one character or as
`E` and a combining accent is one text (found by audits: `CAFÉ` and `münchen@bücher.de` in their
two spellings were two codes and two customers). A key made before texts were normalized is
the text trimmed and lower-cased only: lookups ask for both, so a row stored then is still found.
"""

from __future__ import annotations

import unicodedata


def text_key(text: str) -> str:
    return unicodedata.normalize("NFC", text.strip()).lower()


def text_keys(text: str) -> list[str]:
    """``text_key``, and the key as it was made before texts were normalized."""
    return list(dict.fromkeys((text_key(text), text.strip().lower())))
