"""Async batches and their tasks (spec 01/02, decisions §7.7, issue 15).

Revision ID: 0014
Revises: 0013
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0014'
down_revision = '0013'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), 'postgresql')
PROCESSING = sa.text("status = 'processing'")
WAITING = sa.text("status = 'not_started' AND submitted_at IS NOT NULL")
OPEN = sa.text("status IN ('pending', 'processing')")


def upgrade() -> None:
    op.create_table('async_batches',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('batch_type', sa.String(length=48), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('version', sa.String(length=10), nullable=False),
    sa.Column('token_id', ID, nullable=True),
    sa.Column('total_task_count', sa.Integer(), nullable=False),
    sa.Column('success_task_count', sa.Integer(), nullable=False),
    sa.Column('fail_task_count', sa.Integer(), nullable=False),
    sa.Column('submitted_at', sa.DateTime(), nullable=True),
    sa.Column('closed_at', sa.DateTime(), nullable=True),
    sa.Column('claimed_by', sa.String(length=64), nullable=True),
    sa.Column('claimed_until', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_async_batches_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_async_batches')),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_async_batches_store_id'), 'async_batches', ['store_id'], unique=False)
    op.create_index('ix_async_batches_processing', 'async_batches', ['store_id'], unique=True,
                    postgresql_where=PROCESSING, sqlite_where=PROCESSING)
    op.create_index('ix_async_batches_waiting', 'async_batches', ['submitted_at', 'id'], unique=False,
                    postgresql_where=WAITING, sqlite_where=WAITING)

    op.create_table('async_batch_tasks',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('batch_id', ID, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('body', JSON, nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('result', JSON, nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['batch_id'], ['async_batches.id'],
                            name=op.f('fk_async_batch_tasks_batch_id_async_batches'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_async_batch_tasks')),
    sqlite_autoincrement=True
    )
    op.create_index('ix_async_batch_tasks_batch', 'async_batch_tasks', ['batch_id', 'id'], unique=False)
    op.create_index('ix_async_batch_tasks_open', 'async_batch_tasks', ['batch_id', 'id'], unique=False,
                    postgresql_where=OPEN, sqlite_where=OPEN)


def downgrade() -> None:
    op.drop_index('ix_async_batch_tasks_open', table_name='async_batch_tasks')
    op.drop_index('ix_async_batch_tasks_batch', table_name='async_batch_tasks')
    op.drop_table('async_batch_tasks')
    op.drop_index('ix_async_batches_waiting', table_name='async_batches')
    op.drop_index('ix_async_batches_processing', table_name='async_batches')
    op.drop_index(op.f('ix_async_batches_store_id'), table_name='async_batches')
    op.drop_table('async_batches')
