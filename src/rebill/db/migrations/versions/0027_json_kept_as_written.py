"""Every JSON column is `json` on PostgreSQL, which keeps the text written, not `jsonb`, which
reorders an object's keys (by length, then bytes) and rewrites numbers (`1e16` as an integer of
17 digits, `-0.0` as `0.0`). SQLite keeps the text already, and an answer must not depend on the
database (found by an audit: a customer's `analytics_data`, kept "as sent", came back in another
key order and with other numbers on PostgreSQL; a charge's addresses likewise). No query reads
into these columns with an operator only jsonb has. SQLite: nothing to do.

Revision ID: 0027
Revises: 0026
Create Date: 2026-11-28 12:00:00
"""

from alembic import op
from sqlalchemy import text

revision = '0027'
down_revision = '0026'
branch_labels = None
depends_on = None

_COLUMNS = text("SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() AND data_type = :kind ORDER BY table_name, column_name")


def _retype(source: str, target: str) -> None:
    bind = op.get_bind()
    if bind.dialect.name != 'postgresql':
        return
    by_table: dict[str, list[str]] = {}
    for table, column in bind.execute(_COLUMNS, {"kind": source}):
        if (table, column) != ("async_batch_tasks", "body"):  # json since 0026, and stays so
            by_table.setdefault(table, []).append(column)
    for table, columns in by_table.items():
        changes = ", ".join(f'ALTER COLUMN "{c}" TYPE {target} USING "{c}"::{target}' for c in columns)
        op.execute(f'ALTER TABLE "{table}" {changes}')


def upgrade() -> None:
    _retype("jsonb", "json")


def downgrade() -> None:
    _retype("json", "jsonb")
