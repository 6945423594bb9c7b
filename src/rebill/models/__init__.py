"""All tables, registered on one ``metadata`` (Alembic reads it)."""

from .address import addresses
from .async_batch import async_batch_tasks, async_batches
from .base import metadata
from .bundle import bundle_selection_items, bundle_selections, bundle_variant_collections, bundle_variants
from .catalog import plans, products
from .charge import charge_items, charges, pending_regenerations
from .checkout import checkouts
from .collection import collection_products, collections
from .customer import customers
from .discount import charge_discounts, deleted_discounts, discount_redemptions, discounts
from .event import events
from .gateway import sandbox_payments
from .idempotency import idempotency_keys
from .metafield import metafields
from .order import order_items, orders
from .payment_method import payment_methods
from .processor import processor_endpoints, processor_events, store_processors
from .purchase_item import purchase_items, skips
from .store import revisions, stores, tokens
from .webhook import webhook_attempts, webhook_deliveries, webhook_payloads, webhooks

__all__ = ["metadata", "stores", "tokens", "events", "customers", "addresses", "discounts", "payment_methods",
           "products", "plans", "purchase_items", "skips", "charges", "charge_items", "pending_regenerations", "orders", "order_items", "sandbox_payments", "idempotency_keys",
           "charge_discounts", "deleted_discounts", "discount_redemptions", "metafields", "revisions", "webhooks", "webhook_payloads", "checkouts",
           "webhook_deliveries", "webhook_attempts", "collections", "collection_products",
           "async_batches", "async_batch_tasks",
           "bundle_variants", "bundle_variant_collections", "bundle_selections", "bundle_selection_items",
           "store_processors", "processor_endpoints", "processor_events"]
