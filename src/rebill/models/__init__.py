"""All tables, registered on one ``metadata`` (Alembic reads it)."""

from .address import addresses
from .base import metadata
from .customer import customers
from .discount import discounts
from .event import events
from .payment_method import payment_methods
from .store import stores, tokens

__all__ = ["metadata", "stores", "tokens", "events", "customers", "addresses", "discounts", "payment_methods"]
