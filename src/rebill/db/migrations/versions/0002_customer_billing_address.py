"""Customers keep their 2021-01 billing address as one JSON document instead of ten columns.

The address is only ever read and written whole, never filtered on; as one column a customer
row costs the driver ten columns less on every read (docs/performance.md).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0002'
down_revision = '0001'
branch_labels = None
depends_on = None

FIELDS = ("address1", "address2", "city", "company", "country_code", "first_name", "last_name", "phone",
          "province", "zip")
LENGTHS = {"country_code": 2, "phone": 64, "zip": 32}
JSON = sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql')


def _customers(*columns: sa.ColumnClause) -> sa.TableClause:
    return sa.table("customers", sa.column("id", sa.Integer()), *columns)


def upgrade() -> None:
    op.add_column('customers', sa.Column('billing_address', JSON, nullable=True))
    flat = [sa.column(f"billing_{name}", sa.String()) for name in FIELDS]
    table = _customers(*flat, sa.column("billing_address", JSON))
    conn = op.get_bind()
    rows = conn.execute(sa.select(table.c.id, *flat).where(sa.or_(*(c.isnot(None) for c in flat)))).all()
    for row in rows:
        document = {name: row[i + 1] for i, name in enumerate(FIELDS)}
        conn.execute(table.update().where(table.c.id == row.id).values(billing_address=document))
    # Plain DROP COLUMN on both databases (SQLite 3.35+): no batch rebuild of customers, which
    # would copy the whole table (and needs foreign keys off, see db/migrate.py).
    for name in FIELDS:
        op.drop_column('customers', f'billing_{name}')


def downgrade() -> None:
    for name in FIELDS:
        op.add_column('customers', sa.Column(f'billing_{name}', sa.String(length=LENGTHS.get(name, 255)),
                                             nullable=True))
    flat = [sa.column(f"billing_{name}", sa.String()) for name in FIELDS]
    table = _customers(*flat, sa.column("billing_address", JSON))
    conn = op.get_bind()
    for row in conn.execute(sa.select(table.c.id, table.c.billing_address)
                            .where(table.c.billing_address.isnot(None))).all():
        document = row.billing_address or {}
        conn.execute(table.update().where(table.c.id == row.id)
                     .values({f"billing_{name}": document.get(name) for name in FIELDS}))
    op.drop_column('customers', 'billing_address')
