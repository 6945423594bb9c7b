"""Store settings the real service sends as strings: email, phone, checkout_logo_url (issue 15);
and each order's number in its store, with the counter that gives them.

The store's `email` and `phone` stay, never null any more: a store without one holds `''`
(03-real-fields store/shop, decisions §1.6: strings; clients with strict models refuse null).
`checkout_logo_url` joins them. Orders get `number` (1, 2, 3... per store, in id order for the
orders already made) and `order_numbers` the last number each store gave.

SQLite rebuilds `stores` and `orders` to change a column's nullability: the rebuild keeps
AUTOINCREMENT (ids are never reused, decisions §1.2; an earlier rebuild of `stores` had lost
it) and puts back the triggers of `stores` (migration 0012), which dropping the old table
drops.

Revision ID: 0017
Revises: 0016
Create Date: 2026-11-26 01:30:00
"""

from collections.abc import Iterator
from contextlib import contextmanager

import sqlalchemy as sa
from alembic import op

revision = '0017'
down_revision = '0016'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
EMPTY = sa.text("''")
# Keeps AUTOINCREMENT on a SQLite rebuild (other databases ignore it).
REBUILD = {'table_kwargs': {'sqlite_autoincrement': True}}


@contextmanager
def _triggers_kept(table: str) -> Iterator[None]:
    """SQLite: the table's triggers as they were, after a rebuild dropped them with the table."""
    conn = op.get_bind()
    if conn.dialect.name != 'sqlite':
        yield
        return
    kept = conn.execute(sa.text("SELECT sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :t"),
                        {'t': table}).scalars().all()
    yield
    for sql in kept:
        op.execute(sql)


def upgrade() -> None:
    op.execute("UPDATE stores SET email = '' WHERE email IS NULL")
    op.execute("UPDATE stores SET phone = '' WHERE phone IS NULL")
    with _triggers_kept('stores'), op.batch_alter_table('stores', schema=None, **REBUILD) as batch_op:
        batch_op.alter_column('email', existing_type=sa.String(length=255), nullable=False, server_default=EMPTY)
        batch_op.alter_column('phone', existing_type=sa.String(length=64), nullable=False, server_default=EMPTY)
        batch_op.add_column(sa.Column('checkout_logo_url', sa.String(length=2048), nullable=False,
                                      server_default=EMPTY))

    with op.batch_alter_table('orders', schema=None) as batch_op:
        batch_op.add_column(sa.Column('number', sa.BigInteger(), nullable=True))
    # UPDATE ... FROM: PostgreSQL, and SQLite since 3.33.
    op.execute("UPDATE orders SET number = ranked.n FROM (SELECT id, row_number() OVER "
               "(PARTITION BY store_id ORDER BY id) AS n FROM orders) AS ranked WHERE orders.id = ranked.id")
    with op.batch_alter_table('orders', schema=None, **REBUILD) as batch_op:
        batch_op.alter_column('number', existing_type=sa.BigInteger(), nullable=False)
        batch_op.create_index('ix_orders_store_number', ['store_id', 'number'], unique=True)

    op.create_table('order_numbers',
    sa.Column('store_id', ID, autoincrement=False, nullable=False),
    sa.Column('last_number', sa.BigInteger(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_order_numbers_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('store_id', name=op.f('pk_order_numbers')),
    )
    op.execute("INSERT INTO order_numbers (store_id, last_number) "
               "SELECT store_id, max(number) FROM orders GROUP BY store_id")


def downgrade() -> None:
    op.drop_table('order_numbers')
    with op.batch_alter_table('orders', schema=None, **REBUILD) as batch_op:
        batch_op.drop_index('ix_orders_store_number')
        batch_op.drop_column('number')

    with _triggers_kept('stores'), op.batch_alter_table('stores', schema=None, **REBUILD) as batch_op:
        batch_op.drop_column('checkout_logo_url')
        batch_op.alter_column('phone', existing_type=sa.String(length=64), nullable=True, server_default=None)
        batch_op.alter_column('email', existing_type=sa.String(length=255), nullable=True, server_default=None)
    op.execute("UPDATE stores SET email = NULL WHERE email = ''")
    op.execute("UPDATE stores SET phone = NULL WHERE phone = ''")
