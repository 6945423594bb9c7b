"""A task's body is kept as it was sent: `json` on PostgreSQL, which keeps the text, not `jsonb`,
which rewrites numbers (-0.0 became 0.0, and the task passed a rule its endpoint refused; found
by an audit). SQLite keeps JSON as text already: nothing to do there.

Revision ID: 0026
Revises: 0025
Create Date: 2026-11-27 19:10:00
"""

from alembic import op

revision = '0026'
down_revision = '0025'
branch_labels = None
depends_on = None


def upgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE async_batch_tasks ALTER COLUMN body TYPE json USING body::json')


def downgrade() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute('ALTER TABLE async_batch_tasks ALTER COLUMN body TYPE jsonb USING body::jsonb')
