"""Alembic environment: one code path for SQLite and PostgreSQL."""

from alembic import context

from rebill.db.engine import make_engine
from rebill.db.migrate import foreign_keys_off
from rebill.models import metadata

config = context.config


def run_migrations() -> None:
    engine = make_engine(config.get_main_option("sqlalchemy.url"))
    with engine.connect() as connection, foreign_keys_off(connection):
        context.configure(
            connection=connection,
            target_metadata=metadata,
            # SQLite cannot ALTER most things; batch mode rebuilds tables when needed (with
            # foreign keys off, so a rebuilt parent does not take its children with it).
            render_as_batch=connection.dialect.name == "sqlite",
        )
        with context.begin_transaction():
            context.run_migrations()
    engine.dispose()


if context.is_offline_mode():
    raise SystemExit("offline migrations are not supported; pass a database URL")
run_migrations()
