"""Initial schema: stores, tokens, events, customers, addresses, discounts, payment methods.

Revision ID: 0001
Revises: 
Create Date: 2026-11-21
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = '0001'
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table('stores',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('email', sa.String(length=255), nullable=True),
    sa.Column('phone', sa.String(length=64), nullable=True),
    sa.Column('currency', sa.String(length=3), nullable=False),
    sa.Column('presentment_currencies', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('ships_to', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('shipping_rates', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('tax_rates', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('checkout_platform', sa.String(length=32), nullable=False),
    sa.Column('plan_tier', sa.String(length=16), nullable=False),
    sa.Column('default_api_version', sa.String(length=10), nullable=False),
    sa.Column('timezone', sa.String(length=64), nullable=False),
    sa.Column('weight_unit', sa.String(length=8), nullable=False),
    sa.Column('sandbox', sa.Boolean(), nullable=False),
    sa.Column('installed', sa.Boolean(), nullable=False),
    sa.Column('dunning', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('client_secret', sa.String(length=128), nullable=False),
    sa.Column('rate_limit', sa.String(length=32), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_stores')),
    sa.UniqueConstraint('name', name=op.f('uq_stores_name')),
    sqlite_autoincrement=True
    )
    op.create_table('customers',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('email', sa.String(length=255), nullable=False),
    sa.Column('email_key', sa.String(length=255), nullable=False),
    sa.Column('first_name', sa.String(length=255), nullable=False),
    sa.Column('last_name', sa.String(length=255), nullable=False),
    sa.Column('phone', sa.String(length=64), nullable=True),
    sa.Column('external_customer_id', sa.String(length=64), nullable=True),
    sa.Column('hash', sa.String(length=32), nullable=False),
    sa.Column('accepts_marketing', sa.Boolean(), nullable=False),
    sa.Column('tax_exempt', sa.Boolean(), nullable=False),
    sa.Column('analytics_data', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('processor_type', sa.String(length=32), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('first_charge_processed_at', sa.DateTime(), nullable=True),
    sa.Column('billing_address1', sa.String(length=255), nullable=True),
    sa.Column('billing_address2', sa.String(length=255), nullable=True),
    sa.Column('billing_city', sa.String(length=255), nullable=True),
    sa.Column('billing_company', sa.String(length=255), nullable=True),
    sa.Column('billing_country_code', sa.String(length=2), nullable=True),
    sa.Column('billing_first_name', sa.String(length=255), nullable=True),
    sa.Column('billing_last_name', sa.String(length=255), nullable=True),
    sa.Column('billing_phone', sa.String(length=64), nullable=True),
    sa.Column('billing_province', sa.String(length=255), nullable=True),
    sa.Column('billing_zip', sa.String(length=32), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_customers_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_customers')),
    sa.UniqueConstraint('hash', name=op.f('uq_customers_hash')),
    sa.UniqueConstraint('store_id', 'email_key', name='uq_customers_store_email'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('customers', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_customers_external_customer_id'), ['external_customer_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_customers_store_id'), ['store_id'], unique=False)

    op.create_table('discounts',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('code', sa.String(length=255), nullable=False),
    sa.Column('discount_type', sa.String(length=16), nullable=False),
    sa.Column('value', sa.String(length=40), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('duration', sa.String(length=16), nullable=False),
    sa.Column('duration_usage_limit', sa.Integer(), nullable=True),
    sa.Column('usage_limit', sa.Integer(), nullable=True),
    sa.Column('times_used', sa.Integer(), nullable=False),
    sa.Column('once_per_customer', sa.Boolean(), nullable=False),
    sa.Column('applies_to_id', sa.String(length=64), nullable=True),
    sa.Column('applies_to_resource', sa.String(length=32), nullable=True),
    sa.Column('applies_to_product_type', sa.String(length=16), nullable=False),
    sa.Column('channel_settings', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('first_time_customer_restriction', sa.String(length=64), nullable=True),
    sa.Column('prerequisite_subtotal_min', sa.String(length=40), nullable=True),
    sa.Column('starts_at', sa.DateTime(), nullable=True),
    sa.Column('ends_at', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_discounts_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_discounts')),
    sa.UniqueConstraint('store_id', 'code', name='uq_discounts_store_code'),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('discounts', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_discounts_store_id'), ['store_id'], unique=False)

    op.create_table('events',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('topic', sa.String(length=64), nullable=False),
    sa.Column('resource', sa.String(length=32), nullable=False),
    sa.Column('resource_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('data', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_events_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_events')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.create_index('ix_events_resource', ['resource', 'resource_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_events_store_id'), ['store_id'], unique=False)

    op.create_table('tokens',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('contact_email', sa.String(length=255), nullable=True),
    sa.Column('client_name', sa.String(length=255), nullable=True),
    sa.Column('token_hash', sa.String(length=64), nullable=False),
    sa.Column('token_prefix', sa.String(length=16), nullable=False),
    sa.Column('scopes', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('rate_limit', sa.String(length=32), nullable=True),
    sa.Column('revoked_at', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_tokens_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_tokens')),
    sa.UniqueConstraint('token_hash', name=op.f('uq_tokens_token_hash')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('tokens', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_tokens_store_id'), ['store_id'], unique=False)

    op.create_table('payment_methods',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('customer_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('billing_address', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('is_default', sa.Boolean(), nullable=False),
    sa.Column('payment_type', sa.String(length=32), nullable=False),
    sa.Column('payment_details', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('processor_name', sa.String(length=32), nullable=False),
    sa.Column('processor_customer_token', sa.String(length=255), nullable=True),
    sa.Column('processor_payment_method_token', sa.String(length=255), nullable=True),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('status_reason', sa.String(length=255), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['customer_id'], ['customers.id'], name=op.f('fk_payment_methods_customer_id_customers'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_payment_methods_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_payment_methods')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('payment_methods', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_payment_methods_customer_id'), ['customer_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_payment_methods_store_id'), ['store_id'], unique=False)

    op.create_table('addresses',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('store_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('customer_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=False),
    sa.Column('payment_method_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('discount_id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), nullable=True),
    sa.Column('address1', sa.String(length=255), nullable=False),
    sa.Column('address2', sa.String(length=255), nullable=True),
    sa.Column('city', sa.String(length=255), nullable=False),
    sa.Column('company', sa.String(length=255), nullable=True),
    sa.Column('country_code', sa.String(length=2), nullable=False),
    sa.Column('first_name', sa.String(length=255), nullable=False),
    sa.Column('last_name', sa.String(length=255), nullable=False),
    sa.Column('phone', sa.String(length=64), nullable=False),
    sa.Column('province', sa.String(length=255), nullable=True),
    sa.Column('zip', sa.String(length=32), nullable=True),
    sa.Column('order_note', sa.String(length=4096), nullable=True),
    sa.Column('order_attributes', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('presentment_currency', sa.String(length=3), nullable=False),
    sa.Column('shipping_lines_override', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=True),
    sa.Column('shipping_lines_conserved', sa.JSON().with_variant(postgresql.JSONB(astext_type=sa.Text()), 'postgresql'), nullable=False),
    sa.Column('lock_version', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['customer_id'], ['customers.id'], name=op.f('fk_addresses_customer_id_customers'), ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['discount_id'], ['discounts.id'], name=op.f('fk_addresses_discount_id_discounts'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['payment_method_id'], ['payment_methods.id'], name=op.f('fk_addresses_payment_method_id_payment_methods'), ondelete='SET NULL'),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_addresses_store_id_stores'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_addresses')),
    sqlite_autoincrement=True
    )
    with op.batch_alter_table('addresses', schema=None) as batch_op:
        batch_op.create_index(batch_op.f('ix_addresses_customer_id'), ['customer_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_addresses_discount_id'), ['discount_id'], unique=False)
        batch_op.create_index(batch_op.f('ix_addresses_store_id'), ['store_id'], unique=False)



def downgrade() -> None:
    with op.batch_alter_table('addresses', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_addresses_store_id'))
        batch_op.drop_index(batch_op.f('ix_addresses_discount_id'))
        batch_op.drop_index(batch_op.f('ix_addresses_customer_id'))

    op.drop_table('addresses')
    with op.batch_alter_table('payment_methods', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_payment_methods_store_id'))
        batch_op.drop_index(batch_op.f('ix_payment_methods_customer_id'))

    op.drop_table('payment_methods')
    with op.batch_alter_table('tokens', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_tokens_store_id'))

    op.drop_table('tokens')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_events_store_id'))
        batch_op.drop_index('ix_events_resource')

    op.drop_table('events')
    with op.batch_alter_table('discounts', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_discounts_store_id'))

    op.drop_table('discounts')
    with op.batch_alter_table('customers', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_customers_store_id'))
        batch_op.drop_index(batch_op.f('ix_customers_external_customer_id'))

    op.drop_table('customers')
    op.drop_table('stores')
