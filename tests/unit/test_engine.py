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
