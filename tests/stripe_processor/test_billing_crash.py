"""The SIGKILL tests of the billing run (tests/scenarios/test_billing_crash.py) on a Stripe store
(issue 16, decisions §6.5): real `rebill bill` processes, REBILL_SECRET_KEY set, killed at
every failpoint and started again, and two runs in parallel processes; both databases. The
suite's Stripe says how many PaymentIntents each attempt made: exactly one, and every charge is
recorded paid once with its one order."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter

import pytest
from sqlalchemy import select

from rebill.models import charges, orders
from tests.stripe_processor.conftest import env_with_secret

POINTS = ("billing.after_claim", "billing.after_gateway", "billing.before_commit", "billing.after_record")


def _bill(shop, *, failpoint=None, stale="0"):
    env = {**env_with_secret(), "REBILL_CLAIM_STALE_SECONDS": stale}
    env.pop("REBILL_FAILPOINT", None)
    if failpoint:
        env["REBILL_FAILPOINT"] = failpoint
    url = shop.api.db.engine.url.render_as_string(hide_password=False)
    return subprocess.Popen([sys.executable, "-m", "rebill.cli", "bill", "--store", shop.api.store.name,
                             "--database", url], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _subscribers(shop, n):
    return [shop.subscriber()[0] for _ in range(n)]


def _assert_each_paid_once(shop, charge_ids):
    intents = shop.intents()
    per_key = Counter(i["metadata"]["rebill_idempotency_key"] for i in intents)
    # NOTE: issue 16, never two PaymentIntents for one attempt.
    assert set(per_key.values()) == {1}, per_key
    assert {f"rebill-charge-{i}-attempt-1" for i in charge_ids} <= set(per_key)
    assert {i["status"] for i in intents} == {"succeeded"}
    with shop.api.db.read() as conn:
        statuses = dict(conn.execute(select(charges.c.id, charges.c.status).where(charges.c.id.in_(charge_ids))).all())
        made = Counter(conn.execute(select(orders.c.charge_id).where(orders.c.store_id == shop.api.store.id)).scalars())
        claimed = conn.execute(select(charges.c.id).where(charges.c.store_id == shop.api.store.id,
                                                         charges.c.claimed_by.is_not(None))).all()
        paid = dict(conn.execute(select(charges.c.id, charges.c.external_transaction_id).where(
            charges.c.store_id == shop.api.store.id, charges.c.status == "success")).all())
    assert statuses == {i: "success" for i in charge_ids}
    # The real clock is past the frozen dates: the renewals due since are paid too, each once.
    assert set(made.values()) == {1} and set(charge_ids) <= set(made)
    assert len(made) == len(intents) == len(paid)
    assert set(paid.values()) == {i["id"] for i in intents}
    assert claimed == []


@pytest.mark.parametrize("point", POINTS)
def test_a_run_killed_at_any_step_is_finished_by_the_next_and_stripe_made_one_payment_per_attempt(shop, point):
    charge_ids = _subscribers(shop, 3)
    crashed = _bill(shop, failpoint=point)
    crashed.communicate(timeout=120)
    assert crashed.returncode == -signal.SIGKILL
    restarted = _bill(shop)
    _, err = restarted.communicate(timeout=120)
    assert restarted.returncode == 0, err
    _assert_each_paid_once(shop, charge_ids)
    assert shop.secret_key not in err


def test_two_runs_in_parallel_processes_make_one_payment_per_charge(shop):
    charge_ids = _subscribers(shop, 8)
    runs = [_bill(shop, stale="60"), _bill(shop, stale="60")]
    for proc in runs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    _assert_each_paid_once(shop, charge_ids)
