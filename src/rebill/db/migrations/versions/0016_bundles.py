"""Bundle variants and bundle selections (spec 01, decisions §7.4, §7.7, issue 15): which catalog
variant is a bundle and the collections its contents come from, and the contents each purchase
item holds, a row per item.

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-26 01:30:00
"""

import sqlalchemy as sa
from alembic import op

revision = '0016'
down_revision = '0015'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def _store(table: str) -> tuple[sa.Column, sa.ForeignKeyConstraint]:
    return (sa.Column('store_id', ID, nullable=False),
            sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f(f'fk_{table}_store_id_stores'),
                                    ondelete='CASCADE'))


def _stamps() -> tuple[sa.Column, sa.Column]:
    return (sa.Column('created_at', sa.DateTime(), nullable=False),
            sa.Column('updated_at', sa.DateTime(), nullable=False))


def upgrade() -> None:
    op.create_table('bundle_variants',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    *_store('bundle_variants'),
    sa.Column('external_product_id', sa.String(length=64), nullable=False),
    sa.Column('external_variant_id', sa.String(length=64), nullable=False),
    sa.Column('price_rule', sa.String(length=16), nullable=False),
    sa.Column('min_quantity', sa.Integer(), nullable=True),
    sa.Column('max_quantity', sa.Integer(), nullable=True),
    *_stamps(),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_bundle_variants')),
    sa.UniqueConstraint('store_id', 'external_product_id', 'external_variant_id',
                        name='uq_bundle_variants_store_variant'),
    sqlite_autoincrement=True
    )

    op.create_table('bundle_variant_collections',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    *_store('bundle_variant_collections'),
    sa.Column('bundle_variant_id', ID, nullable=False),
    sa.Column('collection_id', ID, nullable=False),
    sa.Column('min_quantity', sa.Integer(), nullable=True),
    sa.Column('max_quantity', sa.Integer(), nullable=True),
    sa.ForeignKeyConstraint(['bundle_variant_id'], ['bundle_variants.id'],
                            name=op.f('fk_bundle_variant_collections_bundle_variant_id_bundle_variants'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['collection_id'], ['collections.id'],
                            name=op.f('fk_bundle_variant_collections_collection_id_collections')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_bundle_variant_collections')),
    sa.UniqueConstraint('bundle_variant_id', 'collection_id',
                        name='uq_bundle_variant_collections_variant_collection'),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_bundle_variant_collections_collection_id'), 'bundle_variant_collections',
                    ['collection_id'], unique=False)

    op.create_table('bundle_selections',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    *_store('bundle_selections'),
    sa.Column('purchase_item_id', ID, nullable=False),
    sa.Column('bundle_variant_id', ID, nullable=False),
    sa.Column('external_product_id', sa.String(length=64), nullable=False),
    sa.Column('external_variant_id', sa.String(length=64), nullable=False),
    sa.Column('plan_id', ID, nullable=True),
    *_stamps(),
    sa.ForeignKeyConstraint(['purchase_item_id'], ['purchase_items.id'],
                            name=op.f('fk_bundle_selections_purchase_item_id_purchase_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['bundle_variant_id'], ['bundle_variants.id'],
                            name=op.f('fk_bundle_selections_bundle_variant_id_bundle_variants')),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_bundle_selections')),
    sa.UniqueConstraint('purchase_item_id', name=op.f('uq_bundle_selections_purchase_item_id')),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_bundle_selections_store_id'), 'bundle_selections', ['store_id'], unique=False)
    op.create_index(op.f('ix_bundle_selections_bundle_variant_id'), 'bundle_selections', ['bundle_variant_id'],
                    unique=False)

    op.create_table('bundle_selection_items',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    *_store('bundle_selection_items'),
    sa.Column('bundle_selection_id', ID, nullable=False),
    sa.Column('collection_id', ID, nullable=False),
    sa.Column('collection_source', sa.String(length=32), nullable=False),
    sa.Column('external_product_id', sa.String(length=64), nullable=False),
    sa.Column('external_variant_id', sa.String(length=64), nullable=False),
    sa.Column('quantity', sa.Integer(), nullable=False),
    sa.Column('price', sa.String(length=40), nullable=False),
    *_stamps(),
    sa.ForeignKeyConstraint(['bundle_selection_id'], ['bundle_selections.id'],
                            name=op.f('fk_bundle_selection_items_bundle_selection_id_bundle_selections'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_bundle_selection_items')),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_bundle_selection_items_bundle_selection_id'), 'bundle_selection_items',
                    ['bundle_selection_id'], unique=False)
    op.create_index('ix_bundle_selection_items_store_product', 'bundle_selection_items',
                    ['store_id', 'external_product_id'], unique=False)
    op.create_index('ix_bundle_selection_items_store_variant', 'bundle_selection_items',
                    ['store_id', 'external_variant_id'], unique=False)


def downgrade() -> None:
    op.drop_index('ix_bundle_selection_items_store_variant', table_name='bundle_selection_items')
    op.drop_index('ix_bundle_selection_items_store_product', table_name='bundle_selection_items')
    op.drop_index(op.f('ix_bundle_selection_items_bundle_selection_id'), table_name='bundle_selection_items')
    op.drop_table('bundle_selection_items')
    op.drop_index(op.f('ix_bundle_selections_bundle_variant_id'), table_name='bundle_selections')
    op.drop_index(op.f('ix_bundle_selections_store_id'), table_name='bundle_selections')
    op.drop_table('bundle_selections')
    op.drop_index(op.f('ix_bundle_variant_collections_collection_id'), table_name='bundle_variant_collections')
    op.drop_table('bundle_variant_collections')
    op.drop_table('bundle_variants')
