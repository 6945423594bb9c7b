"""Bundle variants and bundle selections (spec 01, decisions §7.4, §7.7, issue 15).

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa  # noqa: F401
from alembic import op  # noqa: F401

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
