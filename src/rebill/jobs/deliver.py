"""Webhook deliveries as a background job (decisions §8.4, issue 14): a loop inside the job
runner of `rebill serve` (and of worker processes) that finds due deliveries in the database,
claims them, sends them concurrently and records what happened (domain/webhook/delivery.py).

Never on a request's path, and fair between receivers: at most ``per_receiver`` deliveries
are in flight to one receiver (scheme, host and port) and ``in_flight`` in all, and a
receiver's deliveries are claimed only while it has a free slot, so one slow or dead receiver
holds a few slots of its own and never the others' (nor leases that expire while queued).
A look for due deliveries leaves out the receivers without room, so the backlog of one, ahead
in id order, never hides the others' deliveries from it.
Outcomes are recorded in batches, one transaction each. Database work runs in worker threads;
the HTTP exchanges run on the event loop.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import Counter, defaultdict, deque
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import lru_cache
from urllib.parse import urlsplit

from starlette.concurrency import run_in_threadpool

from rebill import failpoints
from rebill.db.engine import Database
from rebill.domain.store import clock as store_clock
from rebill.domain.webhook import delivery, fanout, rules, signing
from rebill.domain.webhook.delivery import Outcome, Outgoing
from rebill.domain.webhook.sender import HttpSender, Sender
from rebill.observability import record

from .failures import log_failure
from .workers import worker_name

logger = logging.getLogger("rebill.webhooks")
# How long the loop lets attempts finish before it records them and looks again.
SETTLE_SECONDS = 0.003
# How often a look may look past the receivers it filled (``DeliveryRunner.look``).
DEEPER_SECONDS = 0.5
# The most addresses of full receivers a look leaves out in SQL; candidates of any others are
# still skipped when they come (a receiver serving thousands of webhook addresses).
EXCLUDED_ADDRESSES = 256


# A delivery claimed this long ago (it waited for a slot of its receiver) is looked at again
# before its attempt: its webhook may have been deleted, disabled or given another address since
# (delivery.still_to). One started at its claim goes out as claimed, as one already on the wire.
QUEUED_LOOK_SECONDS = 0.5


@lru_cache(maxsize=4096)
def receiver(address: str) -> tuple[str, str, int | None]:
    """Who receives at ``address``: deliveries in flight are counted per scheme, host and port."""
    parts = urlsplit(address)
    return parts.scheme, (parts.hostname or ""), parts.port


Receiver = tuple[str, str, int | None]


class DeliveryRunner:
    def __init__(self, db: Database, real_now: Callable[[], datetime], *, sender: Sender | None = None,
                 in_flight: int = 128, per_receiver: int = 16, lease: timedelta = timedelta(seconds=30),
                 batch: int = 500, poll_seconds: float = 0.5, worker: str | None = None,
                 private_policy: str = "sandbox") -> None:
        self.db, self.real_now = db, real_now
        self.sender: Sender = sender or HttpSender()
        # REBILL_WEBHOOK_PRIVATE_ADDRESSES, and what it says of each store claimed from: whether
        # its deliveries may reach public addresses only (domain/webhook/rules.py).
        self.private_policy = private_policy
        self._public_only: dict[int, bool] = {}
        self.limit, self.per_receiver, self.lease, self.batch = in_flight, per_receiver, lease, batch
        self.poll_seconds = poll_seconds
        self.worker = worker or worker_name()
        self._busy: Counter[Receiver] = Counter()  # attempts in flight, per receiver
        # Claimed and waiting for a slot of their receiver: a finished attempt starts the next
        # at once, without waiting for the database (the look that claims more runs beside).
        # Each with the monotonic time it was claimed at (``_attempt`` looks again at an old one).
        self._queued: dict[Receiver, deque[tuple[Outgoing, list[str], float]]] = defaultdict(deque)
        self._held: set[int] = set()  # claimed by this runner and not yet recorded
        # Receivers with queued attempts and a free slot of their own, waiting for a slot in
        # all (``in_flight`` taken), oldest first: the next attempt to end, whoever's, frees one.
        self._waiting: dict[Receiver, None] = {}
        self._addresses: dict[Receiver, set[str]] = defaultdict(set)  # the addresses seen, per receiver
        self._deeper_after = 0.0  # monotonic time before which a look does not look past full receivers
        self._tasks: set[asyncio.Task[None]] = set()
        self._done: list[tuple[Outgoing, Outcome]] = []
        self._wake: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = False

    # Being told ------------------------------------------------------------------

    def nudge(self) -> None:
        """Look now (from any thread): a flush wrote deliveries, or one finished."""
        loop, wake = self._loop, self._wake
        if loop is None or wake is None or loop.is_closed():
            return
        try:
            loop.call_soon_threadsafe(wake.set, context=contextvars.Context())  # not the caller's
        except RuntimeError:  # the loop closed meanwhile
            pass

    # The loop --------------------------------------------------------------------

    async def run(self) -> None:
        """Until cancelled: record, look, send what is due, wait to be nudged or for the next poll."""
        self._start()
        fanout.on_new_deliveries(self.nudge)
        try:
            while not self._stopping:
                assert self._wake is not None
                self._wake.clear()
                try:
                    await self._record()
                    await self.look()
                except Exception as exc:  # the next look tries again; the database says what is due
                    log_failure(logger, "looking for due webhook deliveries", exc)
                try:
                    await asyncio.wait_for(self._wake.wait(), self.poll_seconds)
                    await asyncio.sleep(SETTLE_SECONDS)
                except asyncio.TimeoutError:
                    pass
        finally:
            fanout.no_longer(self.nudge)
            await self.stop()

    async def drain(self, *, store_id: int | None = None) -> int:
        """Sends every delivery due now (of one store), and those that fall due behind them,
        until none is left or in flight; returns how many attempts were made. The test clock,
        the benchmark and the tests run deliveries this way."""
        self._start()
        made = 0
        try:
            while True:
                await self._record()
                claimed = await self.look(store_id=store_id)
                made += claimed
                if not claimed and not self._held:
                    return made
                await self._settle()
        finally:
            await self.stop()

    async def _settle(self) -> None:
        """Waits for an attempt to finish, then a moment for others: one recording and one
        look serve all that finished meanwhile (a look per attempt cost more than the attempt)."""
        if self._tasks:
            await asyncio.wait(set(self._tasks), return_when=asyncio.FIRST_COMPLETED)
            await asyncio.sleep(SETTLE_SECONDS)

    async def stop(self) -> None:
        self._stopping = True
        unsent = [outgoing.id for queue in self._queued.values() for outgoing, _, _ in queue]
        for queue in self._queued.values():
            queue.clear()
        self._waiting.clear()
        if unsent:  # claimed, never sent: another worker (or the next start) may take them now
            self._held.difference_update(unsent)
            try:
                await run_in_threadpool(self._release, unsent)
            except Exception as exc:  # their leases lapse instead
                log_failure(logger, f"releasing {len(unsent)} unsent webhook deliveries", exc)
        if self._tasks:
            await asyncio.wait(set(self._tasks))
        await self._record()
        await self.sender.close()
        self._stopping = False

    def _start(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()

    async def look(self, *, store_id: int | None = None) -> int:
        """Claims what is due and has room (in flight or queued: twice ``per_receiver`` per
        receiver, twice ``in_flight`` in all) and starts what has a free slot; returns how
        many it claimed."""
        room = 2 * self.limit - len(self._held)
        if room <= 0:
            return 0
        # Enough candidates to fill the room across several receivers, not a whole batch each
        # time: the look runs after every few attempts. Receivers without room are left out.
        limit = min(self.batch, max(4 * room, 64))
        taking: Counter[Receiver] = Counter()
        candidates = await run_in_threadpool(self._due, store_id, limit, self._full(taking), list(self._held))
        chosen, crowded = self._choose(candidates, room, taking)
        if crowded and len(candidates) >= limit and len(chosen) < room and time.monotonic() >= self._deeper_after:
            # The candidates ran out on receivers this look filled: a backlog of one of them
            # may hide other receivers' deliveries behind it in id order. Look past them (at
            # most every DEEPER_SECONDS: the look reads every due row, and most such looks of
            # a runner with one busy receiver find nothing else).
            self._deeper_after = time.monotonic() + DEEPER_SECONDS
            more = await run_in_threadpool(self._due, store_id, limit, self._full(taking), [*self._held, *chosen])
            chosen += self._choose(more, room - len(chosen), taking)[0]
        if not chosen:
            return 0
        claimed = await run_in_threadpool(self._claim, chosen)
        at = time.monotonic()
        for outgoing, secrets in claimed:
            self._held.add(outgoing.id)
            self._queued[receiver(outgoing.address)].append((outgoing, secrets, at))
        for key in {receiver(o.address) for o, _ in claimed}:
            self._pump(key)
        return len(claimed)

    def _full(self, taking: Counter[Receiver]) -> list[str]:
        """The addresses seen of receivers without room (counting what this look takes), at
        most EXCLUDED_ADDRESSES of them (each is a bound parameter of the look)."""
        full = [address for key, addresses in self._addresses.items() if self._room(key) - taking[key] <= 0
                for address in addresses]
        return full[:EXCLUDED_ADDRESSES]

    def _choose(self, candidates: list[tuple[int, str]], room: int,
                taking: Counter[Receiver]) -> tuple[list[int], bool]:
        """The candidates whose receivers have room (``taking`` counts them), up to ``room``;
        and whether some were left for want of it."""
        chosen: list[int] = []
        crowded = False
        for delivery_id, address in candidates:
            key = receiver(address)
            self._addresses[key].add(address)
            if self._room(key) - taking[key] <= 0:
                crowded = True
                continue
            taking[key] += 1
            chosen.append(delivery_id)
            if len(chosen) >= room:
                break
        return chosen, crowded

    def _room(self, key: Receiver) -> int:
        """How many more of ``key``'s deliveries this runner may claim (in flight or queued)."""
        queued = self._queued.get(key)
        return 2 * self.per_receiver - self._busy[key] - (len(queued) if queued else 0)

    def _pump(self, key: Receiver) -> None:
        """Starts queued attempts of ``key`` while it has free slots, of its own and in all;
        one short of a slot in all waits in ``_waiting`` for the next attempt to end."""
        queue = self._queued[key]
        while queue and self._busy[key] < self.per_receiver:
            if len(self._tasks) >= self.limit:
                self._waiting.setdefault(key, None)  # keeps its place if it was waiting already
                return
            outgoing, secrets, claimed_at = queue.popleft()
            self._busy[key] += 1
            task = asyncio.ensure_future(self._attempt(key, outgoing, secrets, claimed_at))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        self._waiting.pop(key, None)

    def _freed(self, key: Receiver) -> None:
        """An attempt of ``key`` ended: a slot of ``key``'s and one in all are free. The
        receivers that waited for a slot in all go first, oldest first, then ``key`` (which
        waits in line in its turn if none is left). Starting only ``key`` here, as this did,
        stranded a receiver whose attempts had all ended while every slot in all was taken
        (two of them in one turn of the loop, each counting the other as running): nothing
        started its queue again, and its deliveries waited behind a slow receiver's attempts
        until the runner stopped."""
        for waiting in list(self._waiting):
            if len(self._tasks) >= self.limit:
                break
            self._pump(waiting)
        self._pump(key)
        if not self._busy[key] and not self._queued.get(key) and key not in self._waiting:
            # Idle: forgotten, so that a runner of a long-lived worker keeps nothing of the
            # receivers it served once (a platform's stores name thousands). It is not full, so
            # its addresses are no look's to leave out; seen again, they are noted again.
            self._busy.pop(key, None)
            self._queued.pop(key, None)
            self._addresses.pop(key, None)

    # Database work, in worker threads ------------------------------------------------

    def _due(self, store_id: int | None, limit: int, full: list[str], skip: list[int]) -> list[tuple[int, str]]:
        with self.db.read() as conn:
            return delivery.due(conn, self.real_now(), limit=limit, store_id=store_id, skip=skip,
                                addresses_full=full)

    def _claim(self, ids: list[int]) -> list[tuple[Outgoing, list[str]]]:
        """The claimed deliveries, each with the secrets that sign it (its store's, read now:
        a rotation is used from the next claim on)."""
        with self.db.write() as conn:
            claimed = delivery.claim(conn, ids, self.worker, self.real_now(), self.lease)
            stores = delivery.stores_of(conn, (o.store_id for o in claimed))
        failpoints.hit("deliver.after_claim")  # claimed and committed, nothing sent
        now = self.real_now()
        keys = {store_id: signing.secrets_signing(store, now) for store_id, store in stores.items()}
        for store_id, store in stores.items():
            self._public_only[store_id] = not rules.private_allowed(self.private_policy, sandbox=store.sandbox)
        return [(o._replace(offset=store_clock.offset(stores[o.store_id])), keys[o.store_id])
                for o in claimed if o.store_id in keys]

    def _release(self, ids: list[int]) -> None:
        with self.db.write() as conn:
            delivery.release(conn, ids, self.worker)

    def _write(self, done: list[tuple[Outgoing, Outcome]]) -> None:
        began = time.monotonic()
        with self.db.write() as conn:
            disabled = delivery.record(conn, done, self.worker, self.real_now(), self.real_now)
        record.delivery_attempts(done, time.monotonic() - began)  # issue 18: committed, counted
        for webhook_id in disabled:
            logger.warning("webhook %s disabled after %s failed attempts", webhook_id, delivery.retries.MAX_ATTEMPTS)

    # One attempt ----------------------------------------------------------------------

    async def _attempt(self, key: Receiver, outgoing: Outgoing, secrets: list[str], claimed_at: float) -> None:
        outcome: Outcome | None = None
        if time.monotonic() - claimed_at < QUEUED_LOOK_SECONDS or await self._still_to(outgoing):
            sent_at = self.real_now()
            try:
                headers = signing.headers(secrets, outgoing.message_id, outgoing.body, outgoing.topic, sent_at)
                outcome = await self.sender.send(outgoing.address, outgoing.body, headers, sent_at,
                                                 public_only=self._public_only.get(outgoing.store_id, True))
            except Exception as exc:  # noqa: BLE001 - recorded as a failed attempt, never lost
                outcome = Outcome(sent_at, None, 0, None, f"{type(exc).__name__}: {exc}"[:delivery.EXCERPT])
        self._busy[key] -= 1
        if outcome is not None:
            self._done.append((outgoing, outcome))
        # Not running any more: its slot in all is free now, not once its done callback has run
        # (after the other attempts that end in this turn of the loop have looked for one).
        current = asyncio.current_task()
        if current is not None:
            self._tasks.discard(current)
        if not self._stopping:
            self._freed(key)
        self.nudge()

    async def _still_to(self, outgoing: Outgoing) -> bool:
        """A delivery that waited in its receiver's queue (``QUEUED_LOOK_SECONDS`` or more since
        its claim) is sent only if its webhook still takes it there (``delivery.still_to``); one
        gone is forgotten, one whose webhook changed is released for a later claim. A look that
        fails sends it (as it would have been sent at once)."""
        try:
            verdict = await run_in_threadpool(self._look_again, outgoing)
        except Exception as exc:  # noqa: BLE001 - the database is away: the attempt goes ahead
            log_failure(logger, f"looking again at webhook delivery {outgoing.id}", exc)
            return True
        if verdict != delivery.SEND:
            self._held.discard(outgoing.id)
        return verdict == delivery.SEND

    def _look_again(self, outgoing: Outgoing) -> str:
        with self.db.write() as conn:
            verdict = delivery.still_to(conn, outgoing, self.worker)
            if verdict == delivery.LATER:
                delivery.release(conn, [outgoing.id], self.worker)
        return verdict

    async def _record(self) -> None:
        """Writes the outcomes gathered so far, a batch per transaction, while more come in
        (only the loop calls it: one recording at a time)."""
        while self._done:
            done, self._done = self._done, []
            try:
                await run_in_threadpool(self._write, done)
            except Exception as exc:  # leases expire and the deliveries go out again: never lost
                log_failure(logger, f"recording {len(done)} webhook attempts", exc)
            finally:
                self._held.difference_update(o.id for o, _ in done)


def drain_now(db: Database, real_now: Callable[[], datetime], *, store_id: int | None = None,
              sender: Sender | None = None, private_policy: str = "sandbox") -> int:
    """Sends what is due, from synchronous code (the test clock, the CLI, tests), in an event
    loop of its own; returns the attempts made."""
    runner = DeliveryRunner(db, real_now, sender=sender, private_policy=private_policy)
    return asyncio.run(runner.drain(store_id=store_id))
