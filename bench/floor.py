"""The floor under a write: the SQL statements a create runs, and nothing else.

The write target of issue 7 compares `POST /customers` and `POST /subscriptions` with a bare
endpoint. This module measures how far down a create could go on this machine and database:
it replays the statements the service runs for one create (the same tables, indexes and row
widths, rows copied from what the API itself wrote during the run) straight on the driver's
connection, with the values already in the database's own form, one COMMIT per 8 creates (the
group the server's loop writer commits together under wrk's 16 connections). No HTTP, no
parsing, no validation, no pricing, no rendering: what is left is the database's own work plus
the driver's call overhead, the part no Python above it can remove.

From that floor and the bare endpoint's time per request in the same run, the best ratio an
endpoint could reach is ``bare / (bare + floor)``: the stack's cost plus the statements' cost,
with zero application code in between. bench/run.py prints it beside the measured ratio.

    statements of POST /customers:     SELECT (e-mail taken?), INSERT customer, INSERT event
    statements of POST /subscriptions: SELECT address, INSERT subscription, INSERT event,
                                       SELECT the address's queued charge on that date,
                                       INSERT charge + INSERT event (or UPDATE charge + INSERT event),
                                       INSERT charge item
"""

from __future__ import annotations

import random
import time
import uuid
from datetime import date
from typing import Any

from sqlalchemy import create_engine

GROUP = 8  # creates per COMMIT, as the loop writer groups them under -c16


class _Raw:
    """A DBAPI connection with the statements written in the driver's parameter style."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.conn = self.engine.raw_connection()
        self.mark = "?" if self.engine.dialect.paramstyle == "qmark" else "%s"
        self.cursor = self.conn.cursor()
        if self.mark == "?":
            # The server's own settings (db/engine.py): with SQLite's default synchronous=FULL
            # every COMMIT would wait for the disk, which the server's never does.
            for pragma in ("journal_mode=WAL", "synchronous=NORMAL", "foreign_keys=ON"):
                self.cursor.execute(f"PRAGMA {pragma}")

    def sql(self, text: str) -> str:
        return text.replace("?", self.mark)

    def columns(self, table: str) -> list[str]:
        self.cursor.execute(f"SELECT * FROM {table} WHERE 1 = 0")
        return [d[0] for d in self.cursor.description if d[0] != "id"]

    def template(self, table: str, where: str, params: tuple[Any, ...]) -> dict[str, Any]:
        self.cursor.execute(self.sql(f"SELECT * FROM {table} WHERE {where} ORDER BY id DESC LIMIT 1"), params)
        names = [d[0] for d in self.cursor.description]
        return {name: self._native(value) for name, value in zip(names, self.cursor.fetchone())}

    def _native(self, value: Any) -> Any:
        """psycopg reads JSON columns as Python objects and needs them wrapped to write them back."""
        if self.mark == "%s" and isinstance(value, (dict, list)):
            from psycopg.types.json import Json
            return Json(value)
        return value

    def insert(self, table: str, names: list[str]) -> str:
        # SQLite hands the new id over without RETURNING, a few µs cheaper: the floor takes the
        # cheapest way each driver has.
        returning = "" if self.mark == "?" else " RETURNING id"
        return self.sql(f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})"
                        + returning)

    def new_id(self) -> int:
        return self.cursor.lastrowid if self.mark == "?" else self.cursor.fetchone()[0]

    def close(self) -> None:
        self.conn.rollback()
        self.conn.close()
        self.engine.dispose()


def _timed(raw: _Raw, count: int, one: Any, clock: Any = time.perf_counter) -> float:
    """µs per create: ``count`` creates, one COMMIT per GROUP. The rows stay (the benchmark's
    database is thrown away after the run). ``clock``: ``time.process_time`` to compare with
    a create's CPU time in process (bench/writes.py) on a machine that other work shares."""
    started = clock()
    for n in range(count):
        one(n)
        if n % GROUP == GROUP - 1:
            raw.conn.commit()
    raw.conn.commit()
    return (clock() - started) / count * 1e6


def customer_floor(url: str, store_id: int, count: int = 5000, *, outbox: bool = False,
                   clock: Any = time.perf_counter) -> float:
    """µs per `POST /customers`; with ``outbox`` also what its event's deliveries write
    (issue 14): the store's enabled webhooks read, one payload (a body copied from one the API
    rendered), one delivery row per webhook."""
    raw = _Raw(url)
    try:
        names = raw.columns("customers")
        template = raw.template("customers", "store_id = ?", (store_id,))
        event_names = raw.columns("events")
        event = raw.template("events", "store_id = ? AND topic = 'customer/created'", (store_id,))
        taken = raw.sql("SELECT id FROM customers WHERE store_id = ? AND email_key = ?")
        insert, insert_event = raw.insert("customers", names), raw.insert("events", event_names)
        tag = uuid.uuid4().hex[:8]
        cur = raw.cursor
        deliver = _outbox(raw, store_id) if outbox else None

        def one(n: int) -> None:
            email = f"floor-{tag}-{n}@example.com"
            cur.execute(taken, (store_id, email))
            cur.fetchone()
            row = {**template, "email": email, "email_key": email, "hash": f"{tag}{n:016d}"}
            cur.execute(insert, [row[name] for name in names])
            customer_id = raw.new_id()
            cur.execute(insert_event, [{**event, "resource_id": customer_id}[name] for name in event_names])
            event_id = raw.new_id()
            if deliver is not None:
                deliver(event_id, customer_id)
        return _timed(raw, count, one, clock)
    finally:
        raw.close()


def _outbox(raw: _Raw, store_id: int) -> Any:
    """The outbox's statements for one event (domain/webhook/fanout.py)."""
    payload_names, delivery_names = raw.columns("webhook_payloads"), raw.columns("webhook_deliveries")
    payload = raw.template("webhook_payloads", "store_id = ?", (store_id,))
    delivery = raw.template("webhook_deliveries", "store_id = ?", (store_id,))
    enabled = raw.sql("SELECT id, topic, api_version, included_objects FROM webhooks "
                      "WHERE store_id = ? AND disabled_at IS NULL ORDER BY id")
    insert_payload = raw.insert("webhook_payloads", payload_names)
    insert_delivery = raw.sql(f"INSERT INTO webhook_deliveries ({', '.join(delivery_names)}) "
                              f"VALUES ({', '.join('?' * len(delivery_names))})")
    cur = raw.cursor

    def deliver(event_id: int, resource_id: int) -> None:
        cur.execute(enabled, (store_id,))
        hooks = [row[0] for row in cur.fetchall()]
        cur.execute(insert_payload, [{**payload, "event_id": event_id}[name] for name in payload_names])
        payload_id = raw.new_id()
        cur.executemany(insert_delivery, [[{**delivery, "webhook_id": hook, "event_id": event_id,
                                            "payload_id": payload_id, "resource_id": resource_id}[name]
                                           for name in delivery_names] for hook in hooks])
    return deliver


def subscription_floor(url: str, store_id: int, address_ids: tuple[int, int], when: str,
                       count: int = 5000, *, clock: Any = time.perf_counter) -> float:
    raw = _Raw(url)
    try:
        item_names, charge_names, event_names = (raw.columns(t) for t in ("purchase_items", "charges", "events"))
        item = raw.template("purchase_items", "store_id = ? AND kind = 'subscription'", (store_id,))
        charge = raw.template("charges", "store_id = ? AND status = 'queued'", (store_id,))
        event = raw.template("events", "store_id = ?", (store_id,))
        address = raw.sql("SELECT id, customer_id, presentment_currency FROM addresses WHERE store_id = ? AND id = ?")
        queued = raw.sql("SELECT id FROM charges WHERE store_id = ? AND address_id = ? AND status = 'queued' "
                         "AND scheduled_at = ?")
        touch = raw.sql("UPDATE charges SET total_price = ?, updated_at = ? WHERE id = ?")
        insert_item, insert_charge = raw.insert("purchase_items", item_names), raw.insert("charges", charge_names)
        insert_event = raw.insert("events", event_names)
        link = raw.sql("INSERT INTO charge_items (store_id, charge_id, purchase_item_id) VALUES (?, ?, ?)")
        day = when if isinstance(charge["scheduled_at"], str) else date.fromisoformat(when)
        cur = raw.cursor

        def record(topic: str, resource_id: int) -> None:
            row = {**event, "topic": topic, "resource": topic.split("/")[0], "resource_id": resource_id}
            cur.execute(insert_event, [row[name] for name in event_names])
            raw.new_id()

        def one(n: int) -> None:
            cur.execute(address, (store_id, random.randint(*address_ids)))
            address_id, customer_id, _currency = cur.fetchone()
            row = {**item, "address_id": address_id, "customer_id": customer_id}
            cur.execute(insert_item, [row[name] for name in item_names])
            item_id = raw.new_id()
            record("subscription/created", item_id)
            cur.execute(queued, (store_id, address_id, day))
            found = cur.fetchone()
            if found:
                charge_id = found[0]
                cur.execute(touch, (charge["total_price"], charge["updated_at"], charge_id))
                record("charge/updated", charge_id)
            else:
                values = {**charge, "address_id": address_id, "customer_id": customer_id, "scheduled_at": day}
                cur.execute(insert_charge, [values[name] for name in charge_names])
                charge_id = raw.new_id()
                record("charge/created", charge_id)
            cur.execute(link, (store_id, charge_id, item_id))
        return _timed(raw, count, one, clock)
    finally:
        raw.close()


def ceiling(bare_rps: float, floor_us: float) -> float:
    """The best ratio to the bare endpoint a create can reach: its statements added to the
    stack's own time per request, with no application code at all."""
    bare_us = 1e6 / bare_rps
    return bare_us / (bare_us + floor_us)
