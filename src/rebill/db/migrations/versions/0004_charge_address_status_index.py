"""Charges: the address index carries the status, so a replan's look-up of one address's open
charges walks that address's rows alone.

Without statistics SQLite weighed (store, address, date) against (store, status, date) as
equals for ``store_id = ? AND address_id = ? AND status IN (...)`` and took the second: every
queued charge of the store, about 6 ms per write at 10,000 charges (docs/performance.md).

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-23 13:40:00
"""

from alembic import op

revision = '0004'
down_revision = '0003'
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.drop_index('ix_charges_store_address_date')
        batch_op.create_index('ix_charges_store_address_status_date', ['store_id', 'address_id', 'status',
                                                                        'scheduled_at'], unique=False)


def downgrade() -> None:
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.drop_index('ix_charges_store_address_status_date')
        batch_op.create_index('ix_charges_store_address_date', ['store_id', 'address_id', 'scheduled_at'],
                              unique=False)
