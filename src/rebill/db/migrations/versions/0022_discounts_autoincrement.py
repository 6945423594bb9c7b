"""Discount ids are never given again on SQLite (decisions §1.2: ids are unique across the
deployment). Migration 0010 rebuilt `discounts` in batch mode, which dropped the table's
AUTOINCREMENT: SQLite then handed a deleted discount's id to the next one, and the charges
that had carried the old code answered to the new one's id (found by an audit). The table is
rebuilt once more with AUTOINCREMENT; its rows keep their ids, and the sequence starts after
the highest. PostgreSQL's identity sequence never reused ids: nothing to do there.

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-26 22:30:00
"""

from alembic import op

revision = '0022'
down_revision = '0021'
branch_labels = None
depends_on = None


def _rebuild(autoincrement: bool) -> None:
    if op.get_bind().dialect.name != 'sqlite':
        return
    with op.batch_alter_table('discounts', recreate='always',
                              table_kwargs={'sqlite_autoincrement': autoincrement}):
        pass


def upgrade() -> None:
    _rebuild(True)


def downgrade() -> None:
    _rebuild(False)
