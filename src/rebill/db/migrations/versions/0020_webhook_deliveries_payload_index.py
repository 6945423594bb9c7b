"""An index on the payload each webhook delivery names: the retention purge deletes a payload
once no delivery names it any more (REBILL_DELIVERY_RETENTION_DAYS, domain/webhook/retention.py),
and without the index each such look would read every delivery. A webhook's delete, which asks
the same of its deliveries' payloads, uses it too. On PostgreSQL the build (not CONCURRENTLY:
migrations run in one transaction) holds writes to the deliveries while it reads the table.

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-29 09:00:00
"""

from alembic import op

revision = '0020'
down_revision = '0019'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index('ix_webhook_deliveries_payload', 'webhook_deliveries', ['payload_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_webhook_deliveries_payload', table_name='webhook_deliveries')
