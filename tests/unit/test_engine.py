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


def test_postgresql_sessions_idle_in_a_transaction_end_after_the_setting(database):
    """A frozen process's transaction (tests/scenarios/test_frozen_worker.py) is ended by the
    server and its locks freed; the settings allow a year, PostgreSQL at most 2^31 - 1 ms."""
    import pytest

    from rebill.db.engine import make_engine, unavailable
    from rebill.settings import Settings

    if database.dialect != "postgresql":
        pytest.skip("a PostgreSQL setting")
    url = database.engine.url.render_as_string(hide_password=False)
    assert Settings().idle_transaction_seconds == 60.0
    for seconds, shown in ((60.0, "1min"), (0.5, "500ms"), (365 * 86400, "2147483647ms"), (0, "0")):
        engine = make_engine(url, idle_transaction_seconds=seconds)
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() == shown
        engine.dispose()
    engine = make_engine(url, idle_transaction_seconds=0.2)
    try:
        with engine.connect() as conn:
            conn.exec_driver_sql("SELECT 1")
            import time

            time.sleep(0.5)
            with pytest.raises(Exception) as caught:
                conn.exec_driver_sql("SELECT 1")
        # The request or job that meets it is told of a database away, not of a bug.
        assert unavailable(caught.value)
    finally:
        engine.dispose()


def test_the_idle_transaction_setting_is_read_from_the_environment():
    import pytest

    from rebill.settings import Settings

    assert Settings.from_env({"REBILL_IDLE_TRANSACTION_SECONDS": "2.5"}).idle_transaction_seconds == 2.5
    assert Settings.from_env({"REBILL_IDLE_TRANSACTION_SECONDS": "0"}).idle_transaction_seconds == 0.0
    for bad in ("-1", "soon", "nan"):
        with pytest.raises(ValueError, match="REBILL_IDLE_TRANSACTION_SECONDS must be a number of seconds"):
            Settings.from_env({"REBILL_IDLE_TRANSACTION_SECONDS": bad})


def test_the_idle_setting_keeps_the_urls_own_options(database):
    """Found by a review: connect_args replaced an `options` of REBILL_DATABASE_URL (a
    search_path), so a schema-scoped deployment wrote to `public`."""
    import pytest

    from rebill.db.engine import make_engine

    if database.dialect != "postgresql":
        pytest.skip("a PostgreSQL setting")
    url = database.engine.url.update_query_dict({"options": "-c search_path=elsewhere"})
    engine = make_engine(url.render_as_string(hide_password=False), idle_transaction_seconds=2)
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("SHOW search_path").scalar() == "elsewhere"
            assert conn.exec_driver_sql("SHOW idle_in_transaction_session_timeout").scalar() == "2s"
    finally:
        engine.dispose()


def test_a_postgresql_that_takes_the_connection_and_never_answers_fails_as_unavailable(monkeypatch):
    """Found by an audit: a server that accepted the connection and stayed silent (a frozen
    machine, a proxy whose backend hung) held `rebill serve`'s start and every command for good.
    A connection is given CONNECT_SECONDS, then fails as the database away (503, one line); the
    URL's own connect_timeout stands."""
    import socket
    import threading
    import time

    import pytest

    from rebill.db import engine
    from rebill.db.engine import Database, unavailable
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    held: list[socket.socket] = []
    threading.Thread(target=lambda: [held.append(silent.accept()[0]) for _ in range(16)], daemon=True).start()
    port = silent.getsockname()[1]
    monkeypatch.setattr(engine, "CONNECT_SECONDS", 1)
    try:
        for url in (f"postgresql://u@127.0.0.1:{port}/db", f"postgresql://u@127.0.0.1:{port}/db?connect_timeout=2"):
            db = Database.from_url(url)
            began = time.monotonic()
            with pytest.raises(Exception) as failed:
                with db.read():
                    pass
            took = time.monotonic() - began
            assert unavailable(failed.value), failed.value
            # psycopg takes at least 2 s (it raises a lower connect_timeout to 2).
            assert 2 <= took < 4, (url, took)
            db.dispose()
    finally:
        silent.close()
        for conn in held:
            conn.close()


def test_libpq_parameters_of_the_url_leave_the_asyncpg_reads_working(database, clock, caplog):
    """Found by a review: `keepalives_idle` or `sslmode` in REBILL_DATABASE_URL (what
    docs/operations.md suggests against a silent server) made every read a 500 (asyncpg takes
    none of libpq's parameters), and a `connect_timeout` went to the server as a setting."""
    import pytest

    from rebill.db.engine import Database, asyncpg_connection
    from tests.builders import make_customer
    from tests.conftest import make_api

    if database.dialect != "postgresql":
        pytest.skip("a PostgreSQL setting")
    url = database.engine.url.update_query_dict({"keepalives_idle": "30", "connect_timeout": "0",
                                                 "sslmode": "disable", "application_name": "rebill-test"})
    target, args = asyncpg_connection(url)
    assert dict(target.query) == {} and target.drivername == "postgresql+asyncpg"
    assert args == {"ssl": "disable", "server_settings": {"application_name": "rebill-test"}}  # 0: no limit
    assert asyncpg_connection(url.update_query_dict({"connect_timeout": "7"}))[1]["timeout"] == 7.0
    db = Database.from_url(url.render_as_string(hide_password=False))
    try:
        from starlette.testclient import TestClient

        from rebill.app import create_app
        from rebill.settings import RateLimit, Settings
        settings = Settings(database_url="unused", rate_limit=RateLimit(enabled=False), token_cache_seconds=0.0,
                            regenerate_every=0, bill_every=0, purge_every=0, deliver_webhooks=False, batch_every=0)
        with TestClient(create_app(settings, db=db, clock=clock)) as client:
            api = make_api(client, db, clock)
            customer = make_customer(api)
            read = api.get(f"/customers/{customer.id}")
            assert read.status_code == 200, read.text
            assert api.get("/customers").status_code == 200
        assert "could not read the revision" not in caplog.text  # the revision check's own connection
    finally:
        db.dispose()
