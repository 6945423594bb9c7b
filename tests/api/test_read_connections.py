"""PostgreSQL reads keep connections open on the server's event loop (db/read_lanes.py); the
server's shutdown (its ASGI lifespan) closes them on that loop, while it still runs. Left for
the next loop to drop, closing them failed there and the garbage collector found them checked
out (a hundred SAWarnings a run of the suite)."""

from __future__ import annotations

from starlette.testclient import TestClient

from tests.builders import make_customer


def test_the_servers_shutdown_closes_its_read_connections(api):
    customer = make_customer(api)
    headers = {"X-Service-Access-Token": api.token, "X-Service-Version": "2021-11"}
    with TestClient(api.client.app, base_url="http://rebill.test") as server:
        assert server.get(f"/customers/{customer.id}", headers=headers).status_code == 200
        lanes = api.db.async_reads
        if lanes is None:  # SQLite: reads run on the loop's one held connection, no lanes
            assert api.db.dialect == "sqlite"
            return
        assert lanes.checkedin() >= 1
    assert (lanes.checkedin(), lanes.checkedout()) == (0, 0)
    # The suite's own client, on its loop, connects again.
    assert api.get(f"/customers/{customer.id}").status_code == 200
