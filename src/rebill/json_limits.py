"""How deeply JSON may nest (docs/api-choices.md, Hardening), checked before anything decodes
it. Outside ``http/`` because the HTTP edge (request bodies), the API (cursors) and the domain
(a metafield's `json_string` value) all refuse the same depth, and the domain never imports
the HTTP layer."""

from __future__ import annotations

# JSON nested deeper than this is refused before anything walks it: the decoder and every walk
# over a value recurse once per level.
MAX_NESTING = 32
_OPENERS_ONLY = bytes.maketrans(b"{}", b"[]")
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')


def nested_deeper_than(raw: bytes, limit: int = MAX_NESTING) -> bool:
    """Whether the JSON text ``raw`` nests arrays and objects more than ``limit`` levels,
    found without recursion and without decoding; brackets inside strings do not count.

    With no more than ``limit`` opening brackets in all it cannot nest deeper: ordinary bodies
    stop there. Otherwise everything runs in C: escaped backslashes and quotes are dropped
    (pairs of backslashes from the left, as a decoder reads them), then all but quotes and
    brackets; the pieces between quotes are alternately outside and inside strings. Each
    pass of ``replace`` then removes the innermost level of every bracket pair: a pair left
    after ``limit`` passes is a deeper level. (For text that is not JSON the answer only has to
    be safe: the decoder refuses it, and its own recursion guard is caught too.)"""
    if raw.count(b"[") + raw.count(b"{") <= limit:
        return False
    if b"\\" in raw:
        raw = raw.replace(b"\\\\", b"").replace(b'\\"', b"")
    brackets = b"".join(raw.translate(_OPENERS_ONLY, _NOT_STRUCTURE).split(b'"')[::2])
    for _ in range(limit):
        shorter = brackets.replace(b"[]", b"")
        if not shorter:
            return False
        if len(shorter) == len(brackets):
            break  # unbalanced text: only pairs count
        brackets = shorter
    return b"[]" in brackets
