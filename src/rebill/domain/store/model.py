"""Store and token as the domain sees them (decisions §1.3, §1.4)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

import msgspec

CHECKOUT_PLATFORMS = ("platform_b_hosted", "custom", "platform_s_hosted", "platform_s_checkout")
PLAN_TIERS = ("standard", "premium_a", "premium_b")
API_VERSIONS = ("2021-01", "2021-11")

# NOTE: spec 01 Authentication, the scopes a token can carry.
SCOPES = (
    "read_accounts",
    "write_batches", "read_batches",
    "write_customers", "read_customers",
    "write_discounts", "read_discounts",
    "read_events",
    "write_notifications",
    "write_orders", "read_orders",
    "write_payment_methods", "read_payment_methods",
    "write_plans", "read_plans",
    "write_products", "read_products",
    "write_subscriptions", "read_subscriptions",
    "read_store",
    "read_credit_accounts",
    "read_credit_adjustments",
)

DEFAULT_DUNNING = {"first_retry_days": 1, "retry_every_days": 6, "max_attempts": 8,
                   "on_max_retries": "cancel_subscriptions"}
# NOTE: decisions §6.4, what a store may do when the last attempt fails.
DUNNING_ACTIONS = ("cancel_subscriptions", "do_nothing", "cancel_subscriptions_and_customer")
# The bounds an operator may set them within (days between attempts, attempts in all).
DUNNING_DAYS, DUNNING_ATTEMPTS = (1, 365), (1, 50)


class Store(msgspec.Struct, kw_only=True, frozen=True):
    id: int
    name: str
    # NOTE: decisions §1.6, strings, empty until set (never null).
    email: str
    phone: str
    currency: str
    presentment_currencies: list[str]
    ships_to: list[str]
    shipping_rates: list[dict[str, Any]]
    tax_rates: list[dict[str, Any]]
    taxes_included: bool
    checkout_platform: str
    plan_tier: str
    default_api_version: str
    timezone: str
    weight_unit: str
    sandbox: bool
    installed: bool
    dunning: dict[str, Any]
    client_secret: str
    rate_limit: str | None
    created_at: datetime
    updated_at: datetime
    clock_offset_seconds: int = 0
    clock_moving_until: datetime | None = None
    previous_client_secret: str | None = None
    client_secret_rotated_at: datetime | None = None
    upcoming_notice_days: int = 3
    checkout_logo_url: str = ""

    @property
    def currencies(self) -> set[str]:
        """Currencies an address may present in: the store's own plus the enabled ones."""
        return {self.currency, *self.presentment_currencies}


class Token(msgspec.Struct, kw_only=True, frozen=True):
    id: int
    store_id: int
    name: str
    contact_email: str | None
    client_name: str | None
    scopes: frozenset[str]
    rate_limit: str | None

    def allows(self, scope: str) -> bool:
        # A write scope includes its read scope (docs/scopes.md).
        if scope in self.scopes:
            return True
        return scope.startswith("read_") and "write_" + scope[5:] in self.scopes


class TokenRecord(msgspec.Struct, frozen=True):
    """A token as an operator sees it (`rebill tokens list`): its prefix, never its hash.
    Positional, in the order the repository selects its columns (db/rows.py)."""

    id: int
    store_id: int
    name: str
    token_prefix: str
    scopes: list[str]
    created_at: datetime
    revoked_at: datetime | None
