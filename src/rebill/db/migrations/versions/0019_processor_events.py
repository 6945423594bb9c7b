"""The processor's webhooks in (issue 16): each store's endpoint key (the public address
`/processors/stripe/events/{key}` names a random key, not the store), the event ids a store has
applied (each once), and an index that finds a charge by its processor's transaction id (a
refund made in Stripe's Dashboard names the PaymentIntent). Stores already on Stripe get their
key here.

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28 09:00:00
"""

import secrets
from datetime import datetime, timezone

import sqlalchemy as sa
from alembic import op

revision = '0019'
down_revision = '0018'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
PAID = sa.text("external_transaction_id IS NOT NULL")


def upgrade() -> None:
    endpoints = op.create_table('processor_endpoints',
    sa.Column('store_id', ID, autoincrement=False, nullable=False),
    sa.Column('key', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_processor_endpoints_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('store_id', name=op.f('pk_processor_endpoints')),
    sa.UniqueConstraint('key', name=op.f('uq_processor_endpoints_key')),
    )
    op.create_table('processor_events',
    sa.Column('store_id', ID, autoincrement=False, nullable=False),
    sa.Column('processor', sa.String(length=16), nullable=False),
    sa.Column('event_id', sa.String(length=255), nullable=False),
    sa.Column('type', sa.String(length=100), nullable=False),
    sa.Column('received_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_processor_events_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('store_id', 'processor', 'event_id', name=op.f('pk_processor_events')),
    )
    op.create_index(op.f('ix_processor_events_received_at'), 'processor_events', ['received_at'], unique=False)
    op.create_index('ix_charges_store_transaction', 'charges', ['store_id', 'external_transaction_id'], unique=False,
                    postgresql_where=PAID, sqlite_where=PAID)
    conn = op.get_bind()
    on_stripe = conn.execute(sa.text("SELECT store_id FROM store_processors WHERE processor = 'stripe'")).scalars()
    now = datetime.now(timezone.utc).replace(tzinfo=None)
    rows = [{"store_id": store_id, "key": secrets.token_urlsafe(24), "created_at": now} for store_id in on_stripe]
    if rows:
        op.bulk_insert(endpoints, rows)


def downgrade() -> None:
    op.drop_index('ix_charges_store_transaction', table_name='charges')
    op.drop_index(op.f('ix_processor_events_received_at'), table_name='processor_events')
    op.drop_table('processor_events')
    op.drop_table('processor_endpoints')
