"""Webhooks (decisions §8, issue 14): subscriptions, the outbox of deliveries with their payloads
and attempts; the event log's columns for `GET /events` (customer, source, updated attributes);
the store's previous client secret and upcoming-notice days, and the date each charge's and
order's upcoming notice was told for; and the `revisions` row that
triggers bump whenever a store or token changes (every process checks it before trusting its
cache: http/auth.py).

Client secrets move to the Standard Webhooks form: `whsec_` and the base64 of the same 32 bytes
the hex secret held, so nothing signed before changes meaning.

Revision ID: 0012
Revises: 0011
Create Date: 2026-11-26 00:30:00
"""

import base64
import binascii

import sqlalchemy as sa
from alembic import op

revision = '0012'
down_revision = '0011'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')
JSON = sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), 'postgresql')
PENDING = sa.text("status = 'pending'")
WATCHED = ('stores', 'tokens')


def _standard(secret: str) -> str:
    if secret.startswith('whsec_'):
        return secret
    try:
        raw = binascii.unhexlify(secret)
    except (binascii.Error, ValueError):
        raw = secret.encode()
    return 'whsec_' + base64.b64encode(raw).decode()


def _triggers_up() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        op.execute("CREATE FUNCTION rebill_bump_revision() RETURNS trigger AS $$ BEGIN "
                   "UPDATE revisions SET value = value + 1 WHERE id = 1; RETURN NULL; END $$ LANGUAGE plpgsql")
        for table in WATCHED:
            op.execute(f"CREATE TRIGGER trg_{table}_revision AFTER UPDATE OR DELETE ON {table} "
                       f"FOR EACH STATEMENT EXECUTE FUNCTION rebill_bump_revision()")
        return
    for table in WATCHED:
        for when in ('UPDATE', 'DELETE'):
            op.execute(f"CREATE TRIGGER trg_{table}_revision_{when.lower()} AFTER {when} ON {table} "
                       f"BEGIN UPDATE revisions SET value = value + 1 WHERE id = 1; END")


def _triggers_down() -> None:
    if op.get_bind().dialect.name == 'postgresql':
        for table in WATCHED:
            op.execute(f"DROP TRIGGER IF EXISTS trg_{table}_revision ON {table}")
        op.execute("DROP FUNCTION IF EXISTS rebill_bump_revision()")
        return
    for table in WATCHED:
        for when in ('update', 'delete'):
            op.execute(f"DROP TRIGGER IF EXISTS trg_{table}_revision_{when}")


def upgrade() -> None:
    with op.batch_alter_table('stores', schema=None) as batch_op:
        batch_op.add_column(sa.Column('previous_client_secret', sa.String(length=128), nullable=True))
        batch_op.add_column(sa.Column('client_secret_rotated_at', sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column('upcoming_notice_days', sa.Integer(), nullable=False,
                                      server_default=sa.text('3')))
    conn = op.get_bind()
    for store_id, secret in conn.execute(sa.text("SELECT id, client_secret FROM stores")).all():
        conn.execute(sa.text("UPDATE stores SET client_secret = :s WHERE id = :id"),
                     {"s": _standard(secret), "id": store_id})

    for table in ('charges', 'orders'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.add_column(sa.Column('upcoming_told_for', sa.Date(), nullable=True))

    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.add_column(sa.Column('customer_id', ID, nullable=True))
        batch_op.add_column(sa.Column('origin', sa.String(length=16), nullable=True))
        batch_op.add_column(sa.Column('token_id', ID, nullable=True))
        batch_op.add_column(sa.Column('updated_attributes', JSON, nullable=True))
        batch_op.create_index('ix_events_store_customer', ['store_id', 'customer_id'], unique=False)

    op.create_table('webhooks',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('address', sa.String(length=2048), nullable=False),
    sa.Column('topic', sa.String(length=64), nullable=False),
    sa.Column('included_objects', JSON, nullable=False),
    sa.Column('api_version', sa.String(length=10), nullable=False),
    sa.Column('disabled_at', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_webhooks_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhooks')),
    sqlite_autoincrement=True
    )
    op.create_index('ix_webhooks_store_topic', 'webhooks', ['store_id', 'topic'], unique=False)
    op.create_index(op.f('ix_webhooks_store_id'), 'webhooks', ['store_id'], unique=False)

    op.create_table('webhook_payloads',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('event_id', ID, nullable=True),
    sa.Column('body', sa.LargeBinary(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_webhook_payloads_store_id_stores'),
                            ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_payloads')),
    sqlite_autoincrement=True
    )

    op.create_table('webhook_deliveries',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('webhook_id', ID, nullable=False),
    sa.Column('event_id', ID, nullable=True),
    sa.Column('payload_id', ID, nullable=False),
    sa.Column('topic', sa.String(length=64), nullable=False),
    sa.Column('resource', sa.String(length=32), nullable=False),
    sa.Column('resource_id', ID, nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('next_attempt_at', sa.DateTime(), nullable=True),
    sa.Column('claimed_by', sa.String(length=64), nullable=True),
    sa.Column('claimed_until', sa.DateTime(), nullable=True),
    sa.Column('last_status_code', sa.Integer(), nullable=True),
    sa.Column('last_error', sa.String(length=512), nullable=True),
    sa.Column('last_attempt_at', sa.DateTime(), nullable=True),
    sa.Column('succeeded_at', sa.DateTime(), nullable=True),
    sa.Column('created_at', sa.DateTime(), nullable=False),
    sa.Column('updated_at', sa.DateTime(), nullable=False),
    sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_webhook_deliveries_store_id_stores'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['webhook_id'], ['webhooks.id'], name=op.f('fk_webhook_deliveries_webhook_id_webhooks'),
                            ondelete='CASCADE'),
    sa.ForeignKeyConstraint(['payload_id'], ['webhook_payloads.id'],
                            name=op.f('fk_webhook_deliveries_payload_id_webhook_payloads'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_deliveries')),
    sqlite_autoincrement=True
    )
    op.create_index('ix_webhook_deliveries_due', 'webhook_deliveries', ['next_attempt_at'], unique=False,
                    postgresql_where=PENDING, sqlite_where=PENDING)
    op.create_index('ix_webhook_deliveries_order', 'webhook_deliveries',
                    ['webhook_id', 'resource', 'resource_id', 'id'], unique=False,
                    postgresql_where=PENDING, sqlite_where=PENDING)
    op.create_index('ix_webhook_deliveries_store', 'webhook_deliveries', ['store_id', 'id'], unique=False)
    op.create_index('ix_webhook_deliveries_webhook', 'webhook_deliveries', ['webhook_id', 'id'], unique=False)

    op.create_table('webhook_attempts',
    sa.Column('id', ID, autoincrement=True, nullable=False),
    sa.Column('delivery_id', ID, nullable=False),
    sa.Column('store_id', ID, nullable=False),
    sa.Column('number', sa.Integer(), nullable=False),
    sa.Column('replay', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(), nullable=False),
    sa.Column('status_code', sa.Integer(), nullable=True),
    sa.Column('latency_ms', sa.Integer(), nullable=False),
    sa.Column('response', sa.String(length=512), nullable=True),
    sa.Column('error', sa.String(length=512), nullable=True),
    sa.ForeignKeyConstraint(['delivery_id'], ['webhook_deliveries.id'],
                            name=op.f('fk_webhook_attempts_delivery_id_webhook_deliveries'), ondelete='CASCADE'),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_webhook_attempts')),
    sqlite_autoincrement=True
    )
    op.create_index(op.f('ix_webhook_attempts_delivery_id'), 'webhook_attempts', ['delivery_id'], unique=False)

    op.create_table('revisions',
    sa.Column('id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('value', sa.BigInteger(), nullable=False),
    sa.PrimaryKeyConstraint('id', name=op.f('pk_revisions')),
    )
    op.execute("INSERT INTO revisions (id, value) VALUES (1, 0)")
    _triggers_up()


def downgrade() -> None:
    _triggers_down()
    op.drop_table('revisions')
    op.drop_index(op.f('ix_webhook_attempts_delivery_id'), table_name='webhook_attempts')
    op.drop_table('webhook_attempts')
    op.drop_index('ix_webhook_deliveries_webhook', table_name='webhook_deliveries')
    op.drop_index('ix_webhook_deliveries_store', table_name='webhook_deliveries')
    op.drop_index('ix_webhook_deliveries_order', table_name='webhook_deliveries')
    op.drop_index('ix_webhook_deliveries_due', table_name='webhook_deliveries')
    op.drop_table('webhook_deliveries')
    op.drop_table('webhook_payloads')
    op.drop_index(op.f('ix_webhooks_store_id'), table_name='webhooks')
    op.drop_index('ix_webhooks_store_topic', table_name='webhooks')
    op.drop_table('webhooks')
    with op.batch_alter_table('events', schema=None) as batch_op:
        batch_op.drop_index('ix_events_store_customer')
        batch_op.drop_column('updated_attributes')
        batch_op.drop_column('token_id')
        batch_op.drop_column('origin')
        batch_op.drop_column('customer_id')
    for table in ('charges', 'orders'):
        with op.batch_alter_table(table, schema=None) as batch_op:
            batch_op.drop_column('upcoming_told_for')
    with op.batch_alter_table('stores', schema=None) as batch_op:
        batch_op.drop_column('upcoming_notice_days')
        batch_op.drop_column('client_secret_rotated_at')
        batch_op.drop_column('previous_client_secret')
