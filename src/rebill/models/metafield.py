"""Metafields (spec 02 Metafield, decisions §7.2, §7.6): merchant data on another record.

The owner is named by (`owner_resource`, `owner_id`) rather than by a foreign key, since one
column names rows of six tables; the owners' delete paths delete their metafields, each with
its event (``domain/metafield/service.forget``)."""

from sqlalchemy import Column, String, Table, Text, UniqueConstraint

from .base import IdType, id_column, metadata, store_column, timestamps

metafields = Table(
    "metafields",
    metadata,
    id_column(),
    store_column(),
    Column("owner_resource", String(16), nullable=False),
    Column("owner_id", IdType, nullable=False),
    Column("namespace", String(255), nullable=False),
    Column("key", String(255), nullable=False),
    Column("value", Text, nullable=False),
    Column("value_type", String(16), nullable=False),
    # NOTE: decisions §7.2, rendered as a string: empty, never null.
    Column("description", String(255), nullable=False),
    *timestamps(),
    # NOTE: decisions §7.6, (owner, namespace, key) is unique. Its leading columns also serve
    # the owner's look-ups: the list filter, the limit of 50, includes and deletes.
    UniqueConstraint("store_id", "owner_resource", "owner_id", "namespace", "key", name="uq_metafields_owner_key"),
    sqlite_autoincrement=True,
)
