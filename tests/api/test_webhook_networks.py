"""Which networks a store's webhooks may reach (REBILL_WEBHOOK_PRIVATE_ADDRESSES, docs/webhooks.md
"Addresses"): by default a live store's webhooks reach public addresses only, so that a token
cannot make the workers call the machines around them; a sandbox store's reach its own machine
and private networks too. Checked when a webhook is saved (an IP or `localhost` in the address)
and when a delivery connects (what a name resolves to, and the IP in an address saved before).
On both databases (the `api` fixture)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from starlette.testclient import TestClient

from rebill.app import create_app
from rebill.domain.webhook import rules
from rebill.domain.webhook.sender import HttpSender, NotPublic, PublicResolver
from rebill.jobs.deliver import drain_now
from rebill.settings import Settings
from tests.builders import make_customer
from tests.receiver import Receiver

NOT_PUBLIC = rules.NOT_PUBLIC
PRIVATE = ["https://10.0.0.5/hooks", "https://127.0.0.1:8443/hooks", "https://[::1]/hooks",
           "https://169.254.169.254/latest/meta-data", "https://192.168.1.20/x", "https://172.16.0.1/x",
           "https://100.64.0.1/x", "https://0.0.0.0/x", "https://[fc00::1]/x", "https://[fe80::1]/x",
           "https://[::ffff:127.0.0.1]/x", "https://localhost/hooks", "https://app.localhost/hooks",
           # The root's dot names the same host (found by an audit: these were saved on a live store).
           "https://localhost./x", "https://a.localhost./x", "https://LocalHost.:8443/x"]


@contextmanager
def served_with(api: Any, policy: str) -> Iterator[TestClient]:
    """A second app on the same database and clock, with the policy set as a deployment sets it."""
    settings = Settings(database_url="unused", regenerate_every=0, bill_every=0, purge_every=0,
                        deliver_webhooks=False, batch_every=0, webhook_private_addresses=policy)
    with TestClient(create_app(settings, db=api.db, clock=api.clock), base_url="http://rebill.test") as client:
        yield client


def post_webhook(client: TestClient, api: Any, address: str) -> Any:
    return client.post("/webhooks", json={"address": address, "topic": "customer/created"},
                       headers={"X-Service-Access-Token": api.token, "X-Service-Version": api.version})


# The rule ----------------------------------------------------------------------------------

@pytest.mark.parametrize("policy, sandbox, allowed", [
    ("sandbox", True, True), ("sandbox", False, False), ("all", True, True), ("all", False, True),
    ("none", True, False), ("none", False, False)])
def test_the_policy_says_which_stores_may_reach_private_networks(policy, sandbox, allowed):
    assert rules.private_allowed(policy, sandbox=sandbox) is allowed


@pytest.mark.parametrize("ip, public", [
    ("8.8.8.8", True), ("2001:4860::8888", True), ("127.0.0.1", False), ("10.1.2.3", False), ("::1", False),
    ("169.254.169.254", False), ("100.64.0.1", False), ("0.0.0.0", False), ("fe80::1%eth0", False),
    ("::ffff:127.0.0.1", False), ("::ffff:10.0.0.1", False), ("240.0.0.1", False)])
def test_public_means_globally_routable(ip, public):
    assert rules.is_public(ip) is public


@pytest.mark.parametrize("address", PRIVATE)
def test_a_live_stores_address_naming_a_private_network_is_refused_by_default(address):
    assert rules.address_problem(address, sandbox=False) == NOT_PUBLIC
    assert rules.address_problem(address, sandbox=False, private=True) is None
    assert rules.address_problem(address, sandbox=True) is None  # https on a sandbox store: any network


@pytest.mark.parametrize("address", ["https://hooks.example.com/x", "https://8.8.8.8/x", "https://[2001:4860::8888]/x",
                                     "https://localhost.example.com/x", "https://10.0.0.5.example.com/x"])
def test_public_addresses_and_names_are_taken_on_a_live_store(address):
    # A name is the sender's to check when it connects: only IPs and `localhost` are judged here.
    assert rules.address_problem(address, sandbox=False) is None


# Saving a webhook --------------------------------------------------------------------------

@pytest.mark.parametrize("address", ["https://10.0.0.5/hooks", "https://169.254.169.254/latest", "https://localhost/x"])
def test_a_live_store_cannot_save_a_private_address_and_nothing_is_stored(api, address):
    live = api.other_store(sandbox=False)
    reply = live.post("/webhooks", json={"address": address, "topic": "customer/created"})
    assert reply.status_code == 422 and reply.json() == {"errors": {"address": [NOT_PUBLIC]}}
    assert live.get("/webhooks").json()["webhooks"] == []
    made = live.post("/webhooks", json={"address": "https://hooks.example.com/x", "topic": "customer/created"})
    assert made.status_code == 201
    moved = live.put(f"/webhooks/{made.json()['webhook']['id']}", json={"address": address})
    assert moved.status_code == 422 and moved.json() == {"errors": {"address": [NOT_PUBLIC]}}
    assert live.get(f"/webhooks/{made.json()['webhook']['id']}").json()["webhook"]["address"] == \
        "https://hooks.example.com/x"


def test_the_setting_all_lets_a_live_store_save_a_private_address(api):
    live = api.other_store(sandbox=False)
    with served_with(live, "all") as client:
        reply = post_webhook(client, live, "https://10.0.0.5/hooks")
    assert reply.status_code == 201, reply.text


def test_the_setting_none_refuses_a_sandbox_stores_localhost_too(api):
    with served_with(api, "none") as client:
        refused = post_webhook(client, api, "http://127.0.0.1:9000/hooks")
        taken = post_webhook(client, api, "https://hooks.example.com/x")
    assert refused.status_code == 422 and refused.json() == {"errors": {"address": [NOT_PUBLIC]}}
    assert taken.status_code == 201


def test_an_unknown_setting_stops_the_start():
    with pytest.raises(ValueError, match="webhook private addresses must be one of sandbox, all, none"):
        Settings.from_env({"REBILL_WEBHOOK_PRIVATE_ADDRESSES": "some"})
    assert Settings.from_env({"REBILL_WEBHOOK_PRIVATE_ADDRESSES": " ALL "}).webhook_private_addresses == "all"
    assert Settings.from_env({}).webhook_private_addresses == "sandbox"


# Sending -----------------------------------------------------------------------------------

@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    try:
        yield running
    finally:
        running.stop()


def _send(address: str, *, public_only: bool) -> Any:
    async def attempt() -> Any:
        sender = HttpSender(timeout=2)
        try:
            return await sender.send(address, b"{}", {"webhook-id": "msg_1"}, None, public_only=public_only)
        finally:
            await sender.close()
    return asyncio.run(attempt())


@pytest.mark.parametrize("host, why", [("127.1", "not a canonical IPv4 address"),
                                       ("2130706433", "not a canonical IPv4 address"),
                                       ("0x7f.0.0.1", "is not a public address")])
def test_the_other_spellings_of_a_private_ip_never_reach_it(receiver, host, why):
    # No IP to ``ipaddress``, so a save takes them as names. The HTTP client refuses a host
    # that looks like a non-canonical IPv4 address; the hexadecimal one resolves to 127.0.0.1,
    # which the resolver refuses.
    refused = _send(receiver.url.replace("127.0.0.1", host), public_only=True)
    assert refused.status_code is None and why in refused.error
    assert receiver.received == []


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
def test_a_public_only_send_never_connects_to_a_private_address(receiver, host):
    # An IP in the address is checked before anything; a name by what it resolves to (localhost:
    # loopback only), on the connection itself, so it cannot resolve one way then another.
    address = receiver.url.replace("127.0.0.1", host)
    refused = _send(address, public_only=True)
    assert refused.status_code is None and "is not a public address" in refused.error
    assert receiver.received == []
    assert _send(address, public_only=False).status_code == 200
    assert len(receiver.received) == 1


def test_the_resolver_keeps_only_the_public_addresses_of_a_name(monkeypatch):
    answers = [{"hostname": "h", "host": ip, "port": 443, "family": socket.AF_INET, "proto": 0, "flags": 0}
               for ip in ("10.0.0.7", "93.184.216.34", "127.0.0.1")]

    async def resolve(self: Any, host: str, port: int = 0, family: Any = socket.AF_INET) -> list[Any]:
        return answers

    async def both() -> tuple[list[Any], BaseException | None]:
        resolver = PublicResolver()
        monkeypatch.setattr(type(resolver._inner), "resolve", resolve)
        kept = await resolver.resolve("h", 443)
        answers[:] = answers[:1]  # a name with private addresses only
        try:
            await resolver.resolve("h", 443)
        except NotPublic as exc:
            return kept, exc
        finally:
            await resolver.close()
        return kept, None

    kept, refused = asyncio.run(both())
    assert [r["host"] for r in kept] == ["93.184.216.34"]
    assert isinstance(refused, NotPublic) and "h is not a public address" in str(refused)


def test_a_live_stores_delivery_to_an_address_saved_before_the_rule_fails_without_a_connection(api, receiver):
    live = api.other_store(sandbox=False)
    with served_with(live, "all") as client:  # saved while the deployment allowed it
        assert post_webhook(client, live, receiver.url.replace("http:", "https:")).status_code == 201
    make_customer(live)
    assert drain_now(live.db, live.clock.now, store_id=live.store.id) == 1  # the default: sandbox stores only
    assert receiver.received == []
    (logged,) = live.get("/webhook_deliveries").json()["webhook_deliveries"]
    assert "is not a public address" in str(logged), logged  # the attempt's error, in the log


@pytest.mark.parametrize("policy, delivered", [("sandbox", 1), ("none", 0)])
def test_a_sandbox_stores_delivery_to_its_own_machine_follows_the_setting(api, receiver, policy, delivered):
    assert api.post("/webhooks", json={"address": receiver.url, "topic": "customer/created"}).status_code == 201
    make_customer(api)
    assert drain_now(api.db, api.clock.now, store_id=api.store.id, private_policy=policy) == 1
    assert len(receiver.received) == delivered


def test_an_answer_after_the_five_seconds_is_a_timeout_not_a_success():
    """decisions §8.4: a 2xx counts "within 5 seconds" (found by an audit: aiohttp rounded the
    5 s total up to the loop's next whole second, so a 5.4 s answer succeeded)."""
    import socket
    import threading
    import time as clock

    from rebill.domain.webhook.sender import TIMEOUT_SECONDS

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]

    def slow() -> None:
        conn, _ = listener.accept()
        with conn:
            conn.recv(65536)
            clock.sleep(TIMEOUT_SECONDS + 0.4)
            try:
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
            except OSError:  # the sender closed it at its timeout
                pass
    threading.Thread(target=slow, daemon=True).start()

    async def attempt() -> Any:
        sender = HttpSender()  # the real timeout, TIMEOUT_SECONDS
        # Sent just after a whole second of the loop's clock: the rounding lent almost a whole
        # second then, so the answer at 5.4 s succeeded every time (not only sometimes).
        loop = asyncio.get_running_loop()
        await asyncio.sleep(1.05 - loop.time() % 1)
        try:
            return await sender.send(f"http://127.0.0.1:{port}/hook", b"{}", {"webhook-id": "msg_1"}, None)
        finally:
            await sender.close()
    outcome = asyncio.run(attempt())
    listener.close()
    assert not outcome.succeeded and outcome.status_code is None
    assert TIMEOUT_SECONDS * 1000 - 50 <= outcome.latency_ms < (TIMEOUT_SECONDS + 0.3) * 1000


def test_an_answer_holding_a_nul_byte_is_recorded_and_the_delivery_succeeds_once(api, receiver):
    """Found by an audit on PostgreSQL: the answer's excerpt kept its NUL, which PostgreSQL's text
    refuses, so the attempt could never be recorded and the delivery (and the batch recorded with
    it) went out again after every lease. The excerpt keeps U+FFFD instead; the answer is asked
    for uncompressed (gzip bytes hold NULs, and were kept as they came)."""
    from sqlalchemy import select

    from rebill.models import webhook_attempts, webhook_deliveries
    receiver.answer = b"ok\x00bad"
    assert api.post("/webhooks", json={"address": receiver.url, "topic": "customer/created"}).status_code == 201
    make_customer(api)
    assert drain_now(api.db, api.clock.now, store_id=api.store.id, private_policy="sandbox") == 1
    assert drain_now(api.db, api.clock.now, store_id=api.store.id, private_policy="sandbox") == 0
    assert len(receiver.received) == 1
    assert receiver.received[0].headers["accept-encoding"] == "identity"
    with api.db.read() as conn:
        [status] = conn.execute(select(webhook_deliveries.c.status).where(
            webhook_deliveries.c.store_id == api.store.id)).scalars()
        [kept] = conn.execute(select(webhook_attempts.c.response).join(
            webhook_deliveries, webhook_deliveries.c.id == webhook_attempts.c.delivery_id).where(
            webhook_deliveries.c.store_id == api.store.id)).scalars()
    assert (status, kept) == ("succeeded", "ok\ufffdbad")
