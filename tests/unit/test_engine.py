"""Units of work on each database: what a read and a write open on the driver's connection."""

from sqlalchemy import text


def test_writes_are_transactions_and_postgresql_reads_are_single_statements(database):
    with database.write() as conn:
        conn.execute(text("SELECT 1"))
        assert conn.in_transaction()
        if database.dialect == "postgresql":
            assert conn.connection.dbapi_connection.autocommit is False
    with database.read() as conn:
        conn.execute(text("SELECT 1"))
        raw = conn.connection.dbapi_connection
        if database.dialect == "postgresql":
            # READ COMMITTED gives every statement its own snapshot anyway: no BEGIN/ROLLBACK.
            assert raw.autocommit is True
            assert raw.info.transaction_status == 0  # idle: nothing was begun
        else:
            assert raw.in_transaction  # SQLite: one snapshot for the whole read
    # The pooled connection a read used comes back transactional for the next write.
    for _ in range(3):
        with database.write() as conn:
            conn.execute(text("SELECT 1"))
            if database.dialect == "postgresql":
                assert conn.connection.dbapi_connection.autocommit is False
                assert conn.connection.dbapi_connection.info.transaction_status != 0


def test_an_sqlite_too_old_for_the_migrations_is_refused_by_name(monkeypatch, tmp_path):
    import sqlite3

    import pytest

    from rebill.db.engine import make_engine

    monkeypatch.setattr(sqlite3, "sqlite_version_info", (3, 31, 1))
    monkeypatch.setattr(sqlite3, "sqlite_version", "3.31.1")
    with pytest.raises(RuntimeError, match=r"needs SQLite 3\.35\.0 or newer; .* uses SQLite 3\.31\.1"):
        make_engine(f"sqlite:///{tmp_path / 'old.db'}")


def test_every_sqlite_connection_gets_the_pragmas_the_writes_rely_on(tmp_path):
    """WAL (reads never wait for the writer), foreign keys, and a savepoint's sub-journal in
    memory (the loop writer's savepoint per request, docs/performance.md)."""
    from rebill.db.engine import make_engine

    engine = make_engine(f"sqlite:///{tmp_path / 'pragmas.db'}")
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        pragma = {name: raw.execute(f"PRAGMA {name}").fetchone()[0]
                  for name in ("journal_mode", "synchronous", "foreign_keys", "busy_timeout", "temp_store")}
    engine.dispose()
    assert pragma == {"journal_mode": "wal", "synchronous": 1, "foreign_keys": 1,
                      "busy_timeout": 30000, "temp_store": 2}
