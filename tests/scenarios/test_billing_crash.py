"""Exactly once across processes (decisions §6.5): billing runs killed with SIGKILL at every
step and restarted, and two runs in parallel processes, on SQLite and on PostgreSQL. Each is
a real `rebill bill` process on the test database; money is counted in the sandbox
gateway's ledger, as a processor would count it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter

import pytest
from sqlalchemy import select

from rebill.models import charges, orders, sandbox_payments
from tests.builders import charges_of, make_address, make_customer, make_payment_method, make_subscription

POINTS = ("billing.after_claim", "billing.after_gateway", "billing.before_commit", "billing.after_record")


def _bill(api, *, failpoint=None, stale="0"):
    """`rebill bill` for the test's store in its own process (the real clock: every charge of
    the frozen test dates is due)."""
    env = {**os.environ, "REBILL_CLAIM_STALE_SECONDS": stale}
    env.pop("REBILL_FAILPOINT", None)
    if failpoint:
        env["REBILL_FAILPOINT"] = failpoint
    url = api.db.engine.url.render_as_string(hide_password=False)
    return subprocess.Popen([sys.executable, "-m", "rebill.cli", "bill", "--store", api.store.name, "--database", url],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _subscribers(api, n):
    ids = []
    for _ in range(n):
        customer = make_customer(api)
        make_payment_method(api, customer, processor_payment_method_token="pm_ok")
        address = make_address(api, customer)
        make_subscription(api, address)
        [charge] = charges_of(api, address.id)
        ids.append(charge.id)
    return ids


def _assert_each_paid_once(api, charge_ids):
    with api.db.read() as conn:
        taken = Counter(conn.execute(select(sandbox_payments.c.reference).where(
            sandbox_payments.c.store_id == api.store.id, sandbox_payments.c.outcome == "captured")).scalars())
        statuses = dict(conn.execute(select(charges.c.id, charges.c.status).where(charges.c.id.in_(charge_ids))).all())
        made = Counter(conn.execute(select(orders.c.charge_id).where(orders.c.store_id == api.store.id)).scalars())
        claimed = conn.execute(select(charges.c.id).where(charges.c.store_id == api.store.id,
                                                         charges.c.claimed_by.is_not(None))).all()
    # The real clock is months past the frozen test dates, so the run also pays the renewals
    # that came due after the first charges: every one of them once.
    assert set(taken.values()) == {1} and {f"charge {i}" for i in charge_ids} <= set(taken)
    assert statuses == {i: "success" for i in charge_ids}
    assert set(made.values()) == {1} and set(charge_ids) <= set(made)
    assert len(made) == len(taken)
    assert claimed == []


@pytest.mark.parametrize("point", POINTS)
def test_a_run_killed_at_any_step_is_finished_by_the_next_and_nothing_is_paid_twice(api, point):
    charge_ids = _subscribers(api, 3)
    crashed = _bill(api, failpoint=point)
    crashed.communicate(timeout=120)
    assert crashed.returncode == -signal.SIGKILL
    restarted = _bill(api)
    out, err = restarted.communicate(timeout=120)
    assert restarted.returncode == 0, err
    _assert_each_paid_once(api, charge_ids)


def test_two_runs_in_parallel_processes_pay_each_charge_once(api):
    charge_ids = _subscribers(api, 12)
    runs = [_bill(api, stale="60"), _bill(api, stale="60")]
    for proc in runs:
        _, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    _assert_each_paid_once(api, charge_ids)
