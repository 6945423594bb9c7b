"""What a webhook subscription may hold (decisions §8.2, issue 14): a topic of its version's
table, only the related objects that table allows for the topic's resource, and an https
address (a sandbox store may also use http on its own machine, to receive on localhost).

Which stores may send to loopback, private, link-local or reserved networks is the
deployment's choice (``REBILL_WEBHOOK_PRIVATE_ADDRESSES``, docs/webhooks.md "Addresses"): by
default only sandbox stores, so that a live store's token cannot make the workers call the
machines around them (a cloud's metadata address, a database, an admin port). Here an address
that names such a network outright (an IP, `localhost`) is refused when the webhook is saved;
the sender checks what a name resolves to when it connects (sender.py)."""

from __future__ import annotations

import re
import unicodedata
from ipaddress import ip_address
from typing import Any
from urllib.parse import urlsplit

import idna

from rebill.errors import ValidationFailed

from .topics import TOPICS

MAX_ADDRESS = 2048
LOCAL_HOSTS = frozenset({"localhost"})
NOT_PUBLIC = "must be a public address: this store's webhooks may not reach loopback, private or reserved networks"


def private_allowed(policy: str, *, sandbox: bool) -> bool:
    """Whether a store's webhooks may reach non-public networks under ``policy``."""
    return policy == "all" or (policy == "sandbox" and sandbox)


def is_public(ip: str) -> bool:
    """A globally routable address: not loopback, private, link-local, shared, reserved or
    unspecified (an IPv4 address mapped into IPv6 is judged as the IPv4 one)."""
    found = ip_address(ip.split("%", 1)[0])  # an IPv6 zone (fe80::1%eth0) is link-local anyway
    mapped = getattr(found, "ipv4_mapped", None)
    return (mapped or found).is_global


def _local_name(host: str) -> bool:
    # A name with its root's dot (`localhost.`) is the same host (found by an audit: a live
    # store saved `https://localhost./x`).
    host = host.rstrip(".")
    return host in LOCAL_HOSTS or host.endswith(".localhost")


def _names_private(host: str) -> bool:
    """The host names a non-public network outright: a literal IP that is not public, or
    `localhost` (names that resolve are the sender's to check)."""
    if _local_name(host):
        return True
    try:
        return not is_public(host)
    except ValueError:
        return False


def _is_local(host: str) -> bool:
    if _local_name(host):
        return True
    try:
        return ip_address(host).is_loopback
    except ValueError:
        return False


def _bad_host(host: str) -> bool:
    """A host no connection can reach, whatever resolves (found by an audit: `exa%00mple.com`,
    `xn--`, `a..b`, `256.256.256.256` were saved, and every delivery failed): an IP address is
    taken as it is; a name must have no percent-encoded byte, must not end in a number (a
    dotted number that is no IPv4 address), must have no empty or overlong label, and an
    internationalised one must be a name of IDNA 2008 (UTS #46), as the sender's HTTP client
    reads it (not Python's IDNA 2003 codec, which refuses `xn--zca.de`, ß.de, found by a review)."""
    try:
        ip_address(host)
        return False
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    if "%" in host or labels[-1].isdigit() or any(not label or len(label) > 63 for label in labels):
        return True
    if host.isascii() and not any(label.lower().startswith("xn--") for label in labels):
        return False
    try:
        idna.decode(idna.encode(host, uts46=True))
    except (idna.IDNAError, UnicodeError):
        return True
    return False


def address_problem(address: str, *, sandbox: bool, private: bool | None = None) -> str | None:
    """Why ``address`` cannot receive webhooks, or None. ``private``: whether this store may
    reach non-public networks (``private_allowed``; the default policy when not given)."""
    if private is None:
        private = private_allowed("sandbox", sandbox=sandbox)
    if len(address) > MAX_ADDRESS:
        return f"must be at most {MAX_ADDRESS} characters"
    # Unicode's C (controls, format characters such as U+202E, unassigned) and Z (spaces,
    # U+2028/U+2029) categories too: none belongs in a URL, and some change how one reads.
    if any(unicodedata.category(c)[0] in "CZ" for c in address):
        return "must be a URL without spaces or control characters"
    try:
        parts = urlsplit(address)
        host = parts.hostname
        port = parts.port  # raises on a port that is no number or out of range
    except ValueError:
        return "must be a valid URL"
    if port == 0:  # nothing listens on port 0
        return "must be a valid URL"
    if parts.scheme not in ("https", "http") or not host:
        return "must be an https URL"
    if _bad_host(host):
        return "must be a valid URL"
    if parts.username is not None or parts.password is not None:
        return "must not carry a user name or password"
    if parts.scheme == "http":
        if not sandbox:
            return "must be an https URL"
        if not _is_local(host):
            return "must be an https URL (http only on localhost, for a sandbox store)"
    if not private and _names_private(host):
        return NOT_PUBLIC
    return None


DEFAULT_PORTS = {"http": 80, "https": 443}


_UNRESERVED = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~")
_ESCAPE = re.compile(r"%([0-9A-Fa-f]{2})")


def _escapes(text: str) -> str:
    """RFC 3986 §6.2.2.1-2: an escaped unreserved character is that character; other escapes
    in upper case."""
    def one(found: re.Match[str]) -> str:
        char = chr(int(found[1], 16))
        return char if char in _UNRESERVED else f"%{found[1].upper()}"
    return _ESCAPE.sub(one, text)


def _without_dot_segments(path: str) -> str:
    """RFC 3986 §5.2.4 for an absolute path: `.` and `..` segments resolved, as a client
    sending to it does (`/a/./b`, `/a/x/../b` are `/a/b`)."""
    segments = path.split("/")
    kept: list[str] = []
    for index, segment in enumerate(segments):
        last = index == len(segments) - 1
        if segment in (".", ".."):
            if segment == ".." and len(kept) > 1:
                kept.pop()
            if last:
                kept.append("")
            continue
        kept.append(segment)
    return "/".join(kept) or "/"


def address_key(address: str) -> str:
    """The receiver an address names, for "one webhook per address and topic": scheme and host
    in any case, a default port written out or not, an empty query or fragment (never sent),
    escapes of unreserved characters and dot segments name the same one, since the client sends
    them all to one place (RFC 3986 §6.2.2-6.2.3; found by audits: `http://LOCALHOST/x` beside
    `http://localhost/x`, then `/%63reated` and `/./created` beside `/created`, delivered every
    event twice). The address itself is kept as sent."""
    parts = urlsplit(address)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    if port is not None and port != DEFAULT_PORTS.get(parts.scheme):
        host = f"{host}:{port}"
    query = f"?{_escapes(parts.query)}" if parts.query else ""
    return f"{parts.scheme.lower()}://{host}{_without_dot_segments(_escapes(parts.path or '/'))}{query}"


def check(values: dict[str, Any], version: str, *, sandbox: bool, private: bool | None = None) -> None:
    """422 naming every bad field of a whole webhook (topic, included_objects, address)."""
    errors: dict[str, list[str]] = {}
    table = TOPICS[version]
    topic = values["topic"]
    if topic not in table:
        errors["topic"] = [f"{topic} is not a webhook topic of version {version}"]
    else:
        allowed = table[topic]
        wrong = [name for name in values["included_objects"] if name not in allowed]
        if wrong:
            errors["included_objects"] = [
                f"{name} is not allowed for {topic.split('/', 1)[0]} webhooks (allowed: {', '.join(allowed)})"
                for name in wrong]
    problem = address_problem(values["address"], sandbox=sandbox, private=private)
    if problem:
        errors["address"] = [problem]
    if errors:
        raise ValidationFailed(errors)
