"""Creating stores and tokens: operator actions (CLI), never the public API (decisions §1.4)."""

from __future__ import annotations

import base64
import secrets
import unicodedata
from datetime import datetime
from functools import cache
from typing import Any
from urllib.parse import urlsplit
from zoneinfo import available_timezones

from sqlalchemy import Connection

from rebill.errors import NotFound, ValidationFailed

from ..customer.service import EMAIL
from ..geo import country, is_currency
from . import repository
from .model import (
    API_VERSIONS,
    CHECKOUT_PLATFORMS,
    DEFAULT_DUNNING,
    DUNNING_ACTIONS,
    DUNNING_ATTEMPTS,
    DUNNING_DAYS,
    PLAN_TIERS,
    SCOPES,
    Store,
    TokenRecord,
)


def create_store(
    conn: Connection,
    now: datetime,
    *,
    name: str,
    currency: str = "USD",
    ships_to: list[str] | None = None,
    presentment_currencies: list[str] | None = None,
    plan_tier: str = "standard",
    checkout_platform: str = "custom",
    default_api_version: str = "2021-01",
    sandbox: bool = True,
    installed: bool = True,
    timezone: str = "UTC",
    email: str = "",
    phone: str = "",
    checkout_logo_url: str = "",
) -> Store:
    name = name.strip()  # " shop1 " is shop1, as every setting is trimmed (found by an audit)
    contact = {"email": email.strip(), "phone": phone.strip(), "checkout_logo_url": checkout_logo_url.strip()}
    errors = settings_problems(contact)
    # Each country once, in the order given (found by an audit: `us,gb,US` listed the US twice).
    ships = list(dict.fromkeys(c.strip().upper() for c in (ships_to if ships_to is not None else ["US"]) if c.strip()))
    unknown = [c for c in ships if country(c) is None]
    if unknown:
        errors["ships_to"] = [f"unknown country codes: {', '.join(unknown)}"]
    elif not ships:
        # A store that ships nowhere could hold no address (spec 01), and nothing changes it
        # later (found by an audit: `--ships-to ''` made one).
        errors["ships_to"] = ["name at least one country"]
    _choice(errors, "plan_tier", plan_tier, PLAN_TIERS)
    _choice(errors, "checkout_platform", checkout_platform, CHECKOUT_PLATFORMS)
    _choice(errors, "default_api_version", default_api_version, API_VERSIONS)
    # ASCII upper case before the look-up: "ßßß".upper() is "SSSSSS" (found by an audit).
    currency = currency.strip().upper() if currency.isascii() else currency
    if not is_currency(currency):
        errors["currency"] = ["must be an ISO 4217 currency code"]
    presenting = {c.strip().upper() if c.isascii() else c for c in presentment_currencies or [] if c.strip()}
    if bad := sorted(c for c in presenting if not is_currency(c)):
        errors["presentment_currencies"] = [f"not ISO 4217 currency codes: {', '.join(bad)}"]
    if problem := timezone_problem(timezone):
        errors["timezone"] = [problem]
    if problem := name_problem(name):
        errors["name"] = [problem]
    elif repository.by_name(conn, name) is not None:
        errors["name"] = ["a store with this name exists"]
    if errors:
        raise ValidationFailed(errors)
    return repository.insert_store(conn, {
        "name": name,
        **contact,
        "currency": currency,
        "presentment_currencies": sorted(presenting - {currency}),
        "ships_to": ships,
        "shipping_rates": [],
        "tax_rates": [],
        "taxes_included": False,
        "checkout_platform": checkout_platform,
        "plan_tier": plan_tier,
        "default_api_version": default_api_version,
        "timezone": timezone,
        "weight_unit": "g",
        "sandbox": sandbox,
        "installed": installed,
        "dunning": dict(DEFAULT_DUNNING),
        "client_secret": new_client_secret(),
        "rate_limit": None,
        "created_at": now,
        "updated_at": now,
    })


# Files of the tz directory that are no zone of the database: the host's own zone, a
# placeholder, a rules template (found by an audit: `localtime` was taken).
NOT_ZONES = frozenset({"localtime", "Factory", "posixrules", "posix", "right"})


@cache
def _zones() -> frozenset[str]:
    return frozenset(available_timezones())


def timezone_problem(name: str) -> str | None:
    """NOTE: decisions §1.3, a store's time zone decides its "today" (when a charge is due, what
    is in the past): an IANA name, as the tz database spells it (found by an audit: no command
    set one, so every store ran on UTC)."""
    if name not in _zones() or name in NOT_ZONES:
        return "must be an IANA time zone name, such as America/New_York or UTC"
    return None


# NOTE: decisions §1.6, the store's contact settings (issue 15): strings, `""` until set; the
# widths of their columns (models/store.py).
SETTINGS = {"email": 255, "phone": 64, "checkout_logo_url": 2048}


def settings_problems(values: dict[str, str]) -> dict[str, list[str]]:
    """What is wrong with contact settings (stripped), by name, as the API would say it: an
    e-mail as customers' are checked, a logo an absolute http(s) address a page can load."""
    errors: dict[str, list[str]] = {}
    for name, value in values.items():
        problem = None
        if "\x00" in value:
            problem = "must not contain NUL characters"  # PostgreSQL cannot store them
        elif len(value) > SETTINGS[name]:
            problem = f"is too long (at most {SETTINGS[name]} characters)"
        elif value and name == "email" and not EMAIL.match(value):
            problem = "is invalid"
        elif value and name == "checkout_logo_url" and not _web_address(value):
            problem = "must be an http or https URL"
        if problem:
            errors[name] = [problem]
    return errors


def _web_address(value: str) -> bool:
    """An absolute http(s) address with a host and no user name or password; nothing of
    Unicode's C and Z categories (spaces, controls, U+202E...), as webhook addresses."""
    if any(unicodedata.category(c)[0] in "CZ" for c in value):
        return False
    try:
        parts = urlsplit(value)
        _ = parts.port  # raises on a port that is no number or out of range
    except ValueError:  # that, or a malformed IPv6 host
        return False
    return (parts.scheme in ("http", "https") and bool(parts.hostname)
            and parts.username is None and parts.password is None)


def update_settings(conn: Connection, now: datetime, store: Store, *, email: str | None = None,
                    phone: str | None = None, checkout_logo_url: str | None = None,
                    timezone: str | None = None, plan_tier: str | None = None, installed: bool | None = None,
                    dunning: dict[str, Any] | None = None) -> Store:
    """Sets the contact settings, the time zone, the plan tier, whether the store is installed
    and its dunning settings given (None: unchanged; `""` clears a contact setting; ``dunning``
    merges key by key, decisions §1.3, §6.4). Settings equal to the stored ones write nothing:
    `updated_at` stays, and no process drops its cached stores (a store's update bumps the
    revision, migration 0012, so an uninstall reaches every process at its next request)."""
    given = {"email": email, "phone": phone, "checkout_logo_url": checkout_logo_url}
    values: dict[str, Any] = {name: value.strip() for name, value in given.items() if value is not None}
    errors = settings_problems(values)
    if timezone is not None:
        values["timezone"] = timezone.strip()
        if problem := timezone_problem(values["timezone"]):
            errors["timezone"] = [problem]
    if plan_tier is not None:
        values["plan_tier"] = plan_tier.strip()
        _choice(errors, "plan_tier", values["plan_tier"], PLAN_TIERS)
    if installed is not None:
        values["installed"] = installed
    if dunning:
        values["dunning"] = {**DEFAULT_DUNNING, **(store.dunning or {}), **dunning}
        errors.update(_dunning_problems(dunning))
    if errors:
        raise ValidationFailed(errors)
    changes = {name: value for name, value in values.items() if getattr(store, name) != value}
    if not changes:
        return store
    repository.update_store(conn, store.id, {**changes, "updated_at": now})
    return _fresh(conn, store.id)


def _dunning_problems(given: dict[str, Any]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for name, (low, high) in (("first_retry_days", DUNNING_DAYS), ("retry_every_days", DUNNING_DAYS),
                              ("max_attempts", DUNNING_ATTEMPTS)):
        if name in given and not (isinstance(given[name], int) and low <= given[name] <= high):
            errors[name] = [f"must be from {low} to {high}"]
    if "on_max_retries" in given:
        _choice(errors, "on_max_retries", given["on_max_retries"], DUNNING_ACTIONS)
    return errors


def _choice(errors: dict[str, list[str]], name: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        errors[name] = [f"must be one of: {', '.join(choices)}"]


def new_client_secret() -> str:
    """NOTE: decisions §8.3, the Standard Webhooks form: `whsec_` and base64 of 32 random bytes."""
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def rotate_client_secret(conn: Connection, real_now: datetime, store: Store) -> Store:
    """A new client secret; the current one becomes the previous one, which keeps signing
    deliveries for 24 hours after ``real_now`` (webhook/signing.py) so that receivers can
    switch without losing a delivery. Real time, not a test clock: receivers live in it. A
    second rotation within the 24 hours retires the first secret at once (one previous kept)."""
    repository.update_store(conn, store.id, {
        "previous_client_secret": store.client_secret, "client_secret": new_client_secret(),
        "client_secret_rotated_at": real_now, "updated_at": real_now})
    return _fresh(conn, store.id)


NOTICE_DAYS = range(0, 61)


def set_upcoming_notice_days(conn: Connection, now: datetime, store: Store, days: int) -> Store:
    """How many days before a charge or a prepaid order `charge/upcoming` and `order/upcoming`
    are told (issue 14; domain/billing/sweep.py). 0 switches the notices off; past 60 days a
    notice says little that the schedule will still hold."""
    if days not in NOTICE_DAYS:
        raise ValidationFailed.field("upcoming_notice_days",
                                     f"must be a whole number of days from {NOTICE_DAYS[0]} to {NOTICE_DAYS[-1]}")
    repository.update_store(conn, store.id, {"upcoming_notice_days": days, "updated_at": now})
    return _fresh(conn, store.id)


def _fresh(conn: Connection, store_id: int) -> Store:
    found = repository.get(conn, store_id)
    assert found is not None
    return found


def name_problem(name: str) -> str | None:
    """Why a store's or a token's name cannot be (its column holds 255 characters), or None."""
    if not name.strip():
        return "cannot be blank"
    if len(name) > 255 or not name.isprintable():
        return "must be at most 255 printable characters"
    return None


def create_token(
    conn: Connection,
    now: datetime,
    *,
    store: Store,
    scopes: list[str] | None = None,
    name: str = "api",
    contact_email: str | None = None,
    client_name: str | None = None,
) -> str:
    """Returns the raw token; only its hash is kept."""
    chosen = list(SCOPES) if scopes is None else scopes
    errors: dict[str, list[str]] = {}
    # No scope at all is a token for GET /token_information alone (which needs none).
    if unknown := sorted(set(chosen) - set(SCOPES)):
        errors["scopes"] = [f"unknown scopes: {', '.join(unknown)}"]
    if contact_email is not None and (problem := settings_problems({"email": contact_email.strip()}).get("email")):
        errors["contact_email"] = problem  # checked as the store's e-mail is (found by an audit)
    if problem := name_problem(name):
        errors["name"] = [problem]  # as a store's (found by an audit: 300 characters were kept)
    if errors:
        raise ValidationFailed(errors)
    contact_email = contact_email.strip() if contact_email is not None else None
    raw = "rb_" + secrets.token_urlsafe(32)
    repository.insert_token(conn, {
        "store_id": store.id,
        "name": name,
        "contact_email": contact_email,
        "client_name": client_name,
        "token_hash": repository.hash_token(raw),
        "token_prefix": raw[:10],
        "scopes": sorted(set(chosen)),
        "rate_limit": None,
        "revoked_at": None,
        "created_at": now,
        "updated_at": now,
    })
    return raw


def list_tokens(conn: Connection, store: Store) -> list[TokenRecord]:
    """The store's tokens, revoked ones included, oldest first."""
    return repository.tokens_of_store(conn, store.id)


def revoke_token(conn: Connection, now: datetime, token_id: int) -> tuple[TokenRecord, bool]:
    """Revokes a token: requests with it answer 401 from then on (token resolution refuses a
    revoked token; a process that cached it drops its cache at its next request: http/freshness.py).
    Returns the token and whether it was already revoked: revoking twice changes nothing, so an
    operator's script may repeat it."""
    found = repository.token_record(conn, token_id)
    if found is None:
        raise NotFound(f"no token with id {token_id}")
    if found.revoked_at is not None:
        return found, True
    repository.revoke_token(conn, token_id, now)
    revoked = repository.token_record(conn, token_id)
    assert revoked is not None
    return revoked, False
