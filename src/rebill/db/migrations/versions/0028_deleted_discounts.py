"""`deleted_discounts`: the code of each deleted discount, by its id, as codes are matched, so
that the charges' `discount_code` filter finds the processed charges of a deleted discount the
same way on both databases (it compared the charge line's code lower-cased by the database:
PostgreSQL's `lower()` follows the locale, not Python's, outside ASCII). Filled from the charges
that name a discount no longer there: the code their discount line shows.

Revision ID: 0028
Revises: 0027
Create Date: 2026-11-28 12:20:00
"""

import unicodedata

import sqlalchemy as sa
from alembic import op

revision = '0028'
down_revision = '0027'
branch_labels = None
depends_on = None

ID = sa.BigInteger().with_variant(sa.Integer(), 'sqlite')


def _key(code: str) -> str:
    """domain/text_keys.text_key as it is at this revision."""
    return unicodedata.normalize("NFC", code.strip()).lower()


def upgrade() -> None:
    table = op.create_table(
        'deleted_discounts',
        sa.Column('id', ID, autoincrement=False, nullable=False),
        sa.Column('store_id', ID, nullable=False),
        sa.Column('code_key', sa.String(length=255), nullable=False),
        sa.ForeignKeyConstraint(['store_id'], ['stores.id'], name=op.f('fk_deleted_discounts_store_id_stores'),
                                ondelete='CASCADE'),
        sa.PrimaryKeyConstraint('id', name=op.f('pk_deleted_discounts')),
    )
    op.create_index(op.f('ix_deleted_discounts_store_id'), 'deleted_discounts', ['store_id'], unique=False)
    op.create_index('ix_deleted_discounts_store_code_key', 'deleted_discounts', ['store_id', 'code_key'],
                    unique=False)
    bind = op.get_bind()
    code = "discounts->0->>'code'" if bind.dialect.name == 'postgresql' else "json_extract(discounts, '$[0].code')"
    found: dict[int, tuple[int, str]] = {}
    for store_id, discount_id, shown in bind.execute(sa.text(
            f"SELECT store_id, discount_id, {code} FROM charges WHERE discount_id IS NOT NULL "
            "AND discount_id NOT IN (SELECT id FROM discounts) ORDER BY id")):
        if isinstance(shown, str) and discount_id not in found:
            found[discount_id] = (store_id, _key(shown)[:255])
    if found:
        op.bulk_insert(table, [{"id": d, "store_id": s, "code_key": k} for d, (s, k) in found.items()])


def downgrade() -> None:
    op.drop_index('ix_deleted_discounts_store_code_key', table_name='deleted_discounts')
    op.drop_index(op.f('ix_deleted_discounts_store_id'), table_name='deleted_discounts')
    op.drop_table('deleted_discounts')
