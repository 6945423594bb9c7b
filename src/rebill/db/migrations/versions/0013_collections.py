"""Collections and the products in them (spec 01/02 collections, issue 15): a store's named
groups of catalog products, each product at most once in a collection.

Revision ID: 0013
Revises: 0012
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0013'
down_revision = '0012'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def upgrade() -> None:
    op.create_table('collections',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('description', sa.String(length=4096), nullable=False),
    sa.Column('sort_order', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_collections_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_collections')),
    sqlite_autoincrement=True
    )
    op.create_index('ix_collections_store_title', 'collections', ['store_id', 'title'], unique=False)

    op.create_table('collection_products',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('collection_id', ID, nullable=False),
    sa.Column('product_id', ID, nullable=False),
    sa.Column('external_product_id', sa.String(length=64), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_collection_products_store_id_stores'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'],
                            name=op.f('fk_collection_products_collection_id_collections'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['product_id'], ['products.id'],
                            name=op.f('fk_collection_products_product_id_products'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_collection_products')),
    sa.UniqueConstraint('collection_id', 'product_id', name='uq_collection_products_collection_product'),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_collection_products_product_id'), 'collection_products', ['product_id'], unique=False)


def downgrade() -> None:
    op.drop_index(op.f('ix_collection_products_product_id'), table_name='collection_products')
    op.drop_table('collection_products')
    op.drop_index('ix_collections_store_title', table_name='collections')
    op.drop_table('collections')
