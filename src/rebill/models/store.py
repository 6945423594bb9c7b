"""Stores (tenants) and their API tokens: decisions §1."""

from sqlalchemy import BigInteger, Boolean, Column, Integer, String, Table, false, text

from .base import JsonType, UtcDateTime, id_column, metadata, store_column, timestamps

stores = Table(
    "stores",
    metadata,
    id_column(),
    Column("name", String(255), nullable=False, unique=True),
    # NOTE: decisions §1.6, 03-real-fields store/shop: strings, empty until set, never null
    # (clients with strict models refuse null; issue 15).
    Column("email", String(255), nullable=False, server_default=""),
    Column("phone", String(64), nullable=False, server_default=""),
    Column("checkout_logo_url", String(2048), nullable=False, server_default=""),
    Column("currency", String(3), nullable=False),
    Column("presentment_currencies", JsonType, nullable=False),
    Column("ships_to", JsonType, nullable=False),
    Column("shipping_rates", JsonType, nullable=False),
    Column("tax_rates", JsonType, nullable=False),
    # NOTE: decisions §5.9, whether prices include tax (then tax is shown, not added).
    Column("taxes_included", Boolean, nullable=False, server_default=false()),
    Column("checkout_platform", String(32), nullable=False),
    Column("plan_tier", String(16), nullable=False),
    Column("default_api_version", String(10), nullable=False),
    Column("timezone", String(64), nullable=False),
    Column("weight_unit", String(8), nullable=False),
    Column("sandbox", Boolean, nullable=False),
    # NOTE: decisions §6.11, a sandbox store's test clock runs this far ahead of real time.
    Column("clock_offset_seconds", BigInteger, nullable=False, server_default=text("0")),
    # Real time until which an advance holds the clock (domain/billing/travel.py): one at a time.
    Column("clock_moving_until", UtcDateTime(), nullable=True),
    Column("installed", Boolean, nullable=False),
    Column("dunning", JsonType, nullable=False),
    # NOTE: decisions §8.3, the key of both webhook signatures, in the Standard Webhooks form
    # (`whsec_` and base64). After a rotation the previous one signs too, for 24 hours.
    Column("client_secret", String(128), nullable=False),
    Column("previous_client_secret", String(128), nullable=True),
    Column("client_secret_rotated_at", UtcDateTime(), nullable=True),
    # Days before a charge's or a prepaid order's date that `charge/upcoming` and
    # `order/upcoming` are told (issue 14).
    Column("upcoming_notice_days", Integer, nullable=False, server_default=text("3")),
    # "BURST/PER_SECOND" overriding the server default for every token of the store.
    Column("rate_limit", String(32), nullable=True),
    *timestamps(),
    sqlite_autoincrement=True,
)

tokens = Table(
    "tokens",
    metadata,
    id_column(),
    store_column(),
    Column("name", String(255), nullable=False),
    Column("contact_email", String(255), nullable=True),
    Column("client_name", String(255), nullable=True),
    # NOTE: decisions §1.4, only a SHA-256 of the token is stored; tokens are 256-bit random.
    Column("token_hash", String(64), nullable=False, unique=True),
    Column("token_prefix", String(16), nullable=False),
    Column("scopes", JsonType, nullable=False),
    Column("rate_limit", String(32), nullable=True),
    Column("revoked_at", UtcDateTime(), nullable=True),
    *timestamps(),
    sqlite_autoincrement=True,
)

# One row, bumped by triggers (migration 0012) whenever a store or a token changes: every
# process compares it before trusting its cached stores and tokens, so an operator's change
# (a clock advance, a revoked token) is seen at the very next request (http/auth.py).
revisions = Table(
    "revisions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=False),
    Column("value", BigInteger, nullable=False),
)
