"""The schedule: products, plans, purchase items (subscriptions and one-time items), skips,
charges and their items, deferred regenerations; stores get `taxes_included`.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-23 09:34:18.260384
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0003'
down_revision = '0002'
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('charges',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('customer_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('address_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('scheduled_at', sa.Date(), nullable=False),
    sa.Column('status', sa.String(length=24), nullable=False),
    sa.Column('type', sa.String(length=16), nullable=False),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('line_items', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('shipping_lines', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('tax_lines', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('discounts', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('discount_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('billing_address', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('shipping_address', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('order_attributes', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('note', sa.String(length=4096), nullable=True),
    sa.Column('tags', sa.String(length=1024), nullable=True),
    sa.Column('taxable', sa.Boolean(), nullable=False),
    sa.Column('taxes_included', sa.Boolean(), nullable=False),
    sa.Column('subtotal_price', sa.String(length=40), nullable=False),
    sa.Column('total_discounts', sa.String(length=40), nullable=False),
    sa.Column('total_line_items_price', sa.String(length=40), nullable=False),
    sa.Column('total_tax', sa.String(length=40), nullable=False),
    sa.Column('total_shipping', sa.String(length=40), nullable=False),
    sa.Column('total_price', sa.String(length=40), nullable=False),
    sa.Column('total_refunds', sa.String(length=40), nullable=False),
    sa.Column('total_weight_grams', sa.Integer(), nullable=False),
    sa.Column('orders_count', sa.Integer(), nullable=False),
    sa.Column('processed_at', sa.DateTime(), nullable=True),
    sa.Column('error', sa.String(length=1024), nullable=True),
    sa.Column('error_type', sa.String(length=64), nullable=True),
    sa.Column('charge_attempts', sa.Integer(), nullable=False),
    sa.Column('retry_date', sa.Date(), nullable=True),
    sa.Column('last_charge_attempt', sa.DateTime(), nullable=True),
    sa.Column('external_order_id', sa.String(length=64), nullable=True),
    sa.Column('external_transaction_id', sa.String(length=128), nullable=True),
    sa.Column('payment_processor', sa.String(length=32), nullable=True),
    sa.Column('has_uncommitted_changes', sa.Boolean(), nullable=False),
    sa.Column('merged_at', sa.DateTime(), nullable=True),
    sa.Column('original_scheduled_at', sa.Date(), nullable=True),
    sa.Column('lock_version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_charges_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_charges')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_charges_customer_id'), ['customer_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_charges_discount_id'), ['discount_id'], unique=False)
        batch_op.create_index('ix_charges_store_address_date', ['store_id', 'address_id', 'scheduled_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_charges_store_id'), ['store_id'], unique=False)
        batch_op.create_index('ix_charges_store_status_date', ['store_id', 'status', 'scheduled_at'], unique=False)
        batch_op.create_index('ix_charges_store_scheduled', ['store_id', 'scheduled_at'], unique=False)

    op.create_table('products',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('external_product_id', sa.String(length=64), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('handle', sa.String(length=255), nullable=True),
    sa.Column('product_type', sa.String(length=255), nullable=True),
    sa.Column('vendor', sa.String(length=255), nullable=True),
    sa.Column('description', sa.String(length=4096), nullable=True),
    sa.Column('images', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('requires_shipping', sa.Boolean(), nullable=False),
    sa.Column('taxable', sa.Boolean(), nullable=False),
    sa.Column('variants', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_products_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_products')),
    sa.UniqueConstraint('store_id', 'external_product_id', name='uq_products_store_external_id'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('products', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_products_store_id'), ['store_id'], unique=False)

    op.create_table('charge_items',
    sa.Column('charge_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('purchase_item_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.ForeignKeyConstraint(['charge_id'], ['charges.id'], name=op.f('fk_charge_items_charge_id_charges'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('charge_id', 'purchase_item_id', name=op.f('pk_charge_items'))
    )
    with op.batch_alter_table('charge_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_charge_items_purchase_item_id'), ['purchase_item_id'], unique=False)

    op.create_table('plans',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('product_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('external_product_id', sa.String(length=64), nullable=False),
    sa.Column('title', sa.String(length=255), nullable=False),
    sa.Column('type', sa.String(length=16), nullable=False),
    sa.Column('discount_amount', sa.String(length=40), nullable=True),
    sa.Column('discount_type', sa.String(length=16), nullable=True),
    sa.Column('channel_settings', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('sort_order', sa.Integer(), nullable=False),
    sa.Column('subscription_preferences', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('external_variant_ids', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['product_id'], ['products.id'], name=op.f('fk_plans_product_id_products'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_plans_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_plans')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('plans', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_plans_external_product_id'), ['external_product_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_plans_product_id'), ['product_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_plans_store_id'), ['store_id'], unique=False)

    op.create_table('pending_regenerations',
    sa.Column('address_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('due_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['address_id'], ['addresses.id'], name=op.f('fk_pending_regenerations_address_id_addresses'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('address_id', name=op.f('pk_pending_regenerations'))
    )
    with op.batch_alter_table('pending_regenerations', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_pending_regenerations_due_at'), ['due_at'], unique=False)
        batch_op.create_index(batch_op.f('ix_pending_regenerations_store_id'), ['store_id'], unique=False)

    op.create_table('purchase_items',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('customer_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('address_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('plan_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('external_product_id', sa.String(length=64), nullable=True),
    sa.Column('external_variant_id', sa.String(length=64), nullable=True),
    sa.Column('product_title', sa.String(length=255), nullable=False),
    sa.Column('variant_title', sa.String(length=255), nullable=True),
    sa.Column('sku', sa.String(length=255), nullable=True),
    sa.Column('sku_override', sa.Boolean(), nullable=False),
    sa.Column('price', sa.String(length=40), nullable=False),
    sa.Column('quantity', sa.Integer(), nullable=False),
    sa.Column('properties', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('grams', sa.Integer(), nullable=True),
    sa.Column('taxable', sa.Boolean(), nullable=False),
    sa.Column('requires_shipping', sa.Boolean(), nullable=False),
    sa.Column('images', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('presentment_currency', sa.String(length=3), nullable=False),
    sa.Column('next_charge_scheduled_at', sa.Date(), nullable=True),
    sa.Column('charge_interval_frequency', sa.Integer(), nullable=True),
    sa.Column('order_interval_frequency', sa.Integer(), nullable=True),
    sa.Column('order_interval_unit', sa.String(length=8), nullable=True),
    sa.Column('order_day_of_month', sa.Integer(), nullable=True),
    sa.Column('order_day_of_week', sa.Integer(), nullable=True),
    sa.Column('cutoff_day_of_month', sa.Integer(), nullable=True),
    sa.Column('cutoff_day_of_week', sa.Integer(), nullable=True),
    sa.Column('expire_after_specific_number_of_charges', sa.Integer(), nullable=True),
    sa.Column('anchor_day', sa.Integer(), nullable=True),
    sa.Column('charges_count', sa.Integer(), nullable=False),
    sa.Column('last_charge_date', sa.Date(), nullable=True),
    sa.Column('cancelled_next_date', sa.Date(), nullable=True),
    sa.Column('is_skippable', sa.Boolean(), nullable=False),
    sa.Column('is_swappable', sa.Boolean(), nullable=False),
    sa.Column('max_retries_reached', sa.Boolean(), nullable=False),
    sa.Column('cancellation_reason', sa.String(length=1024), nullable=True),
    sa.Column('cancellation_reason_comments', sa.String(length=4096), nullable=True),
    sa.Column('cancelled_at', sa.DateTime(), nullable=True),
    sa.Column('analytics_data', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('lock_version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['address_id'], ['addresses.id'], name=op.f('fk_purchase_items_address_id_addresses'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['customer_id'], ['customers.id'], name=op.f('fk_purchase_items_customer_id_customers'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_purchase_items_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_purchase_items')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('purchase_items', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_purchase_items_address_id'), ['address_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_purchase_items_customer_id'), ['customer_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_purchase_items_store_id'), ['store_id'], unique=False)
        batch_op.create_index('ix_purchase_items_store_kind_id', ['store_id', 'kind', 'id'], unique=False)

    op.create_table('skips',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('purchase_item_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('address_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('date', sa.Date(), nullable=False),
    sa.ForeignKeyConstraint(['purchase_item_id'], ['purchase_items.id'], name=op.f('fk_skips_purchase_item_id_purchase_items'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_skips_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_skips')),
    sa.UniqueConstraint('purchase_item_id', 'date', name='uq_skips_item_date'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('skips', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_skips_address_id'), ['address_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_skips_store_id'), ['store_id'], unique=False)

    # Plain ADD/DROP COLUMN on both databases: no batch rebuild of stores (see 0002).
    op.add_column('stores', sa.Column('taxes_included', sa.Boolean(), server_default=sa.false(), nullable=False))



def downgrade() -> None:
    op.drop_column('stores', 'taxes_included')

    with op.batch_alter_table('skips', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_skips_store_id'))
        batch_op.drop_index(batch_op.f('ix_skips_address_id'))

    op.drop_table('skips')
    with op.batch_alter_table('purchase_items', schema=None) as batch_op:
        batch_op.drop_index('ix_purchase_items_store_kind_id')
        batch_op.drop_index(batch_op.f('ix_purchase_items_store_id'))
        batch_op.drop_index(batch_op.f('ix_purchase_items_customer_id'))
        batch_op.drop_index(batch_op.f('ix_purchase_items_address_id'))

    op.drop_table('purchase_items')
    with op.batch_alter_table('pending_regenerations', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_pending_regenerations_store_id'))
        batch_op.drop_index(batch_op.f('ix_pending_regenerations_due_at'))

    op.drop_table('pending_regenerations')
    with op.batch_alter_table('plans', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_plans_store_id'))
        batch_op.drop_index(batch_op.f('ix_plans_product_id'))
        batch_op.drop_index(batch_op.f('ix_plans_external_product_id'))

    op.drop_table('plans')
    with op.batch_alter_table('charge_items', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_charge_items_purchase_item_id'))

    op.drop_table('charge_items')
    with op.batch_alter_table('products', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_products_store_id'))

    op.drop_table('products')
    with op.batch_alter_table('charges', schema=None) as batch_op:
        batch_op.drop_index('ix_charges_store_scheduled')
        batch_op.drop_index('ix_charges_store_status_date')
        batch_op.drop_index(batch_op.f('ix_charges_store_id'))
        batch_op.drop_index('ix_charges_store_address_date')
        batch_op.drop_index(batch_op.f('ix_charges_discount_id'))
        batch_op.drop_index(batch_op.f('ix_charges_customer_id'))

    op.drop_table('charges')
