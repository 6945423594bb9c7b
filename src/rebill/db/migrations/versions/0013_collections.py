"""Collections and the products in them (spec 01/02 collections, issue 15).

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
