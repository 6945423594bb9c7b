"""How far the Stripe gateway looks for the PaymentIntent a payment key made (issue 16,
domain/payment/stripe_gateway.py): the account's recent PaymentIntents, newest first, a page of
100 at a time, ``INTENT_PAGES`` pages at most. Found by a review: past those pages the look-up
said "made nothing", and a retry whose method had gone recorded "no payment method", after
which the next attempt charged again. Past them nothing is known (GatewayUnavailable)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from rebill.domain.payment.gateway import CAPTURED, GatewayUnavailable
from rebill.domain.payment.stripe_gateway import INTENT_PAGES, StripeGateway

COUNT = INTENT_PAGES * 100 + 500


class _Page(dict):
    def to_dict(self) -> dict[str, Any]:
        return dict(self)


def _gateway(calls: list[dict[str, Any]]) -> StripeGateway:
    """A gateway whose client lists COUNT PaymentIntents of the account, newest (k{COUNT-1}) first."""
    intents = [{"id": f"pi_{i}", "status": "succeeded", "metadata": {"rebill_idempotency_key": f"k{i}"}}
               for i in range(COUNT - 1, -1, -1)]

    def listed(params: dict[str, Any]) -> _Page:
        calls.append(params)
        data = intents
        if "starting_after" in params:
            ids = [i["id"] for i in data]
            data = data[ids.index(params["starting_after"]) + 1:]
        return _Page(data=data[:params["limit"]], has_more=len(data) > params["limit"])
    gateway = StripeGateway.__new__(StripeGateway)
    gateway.client = SimpleNamespace(v1=SimpleNamespace(payment_intents=SimpleNamespace(list=listed)))
    gateway._pauses, gateway._sleep = (), lambda _seconds: None
    return gateway


def test_a_recent_payment_is_found_on_its_page():
    calls: list[dict[str, Any]] = []
    found = _gateway(calls).made(1, f"k{COUNT - 250}")
    assert found is not None and (found.outcome, found.transaction_id) == (CAPTURED, f"pi_{COUNT - 250}")
    assert len(calls) == 3  # pages of 100, newest first


def test_a_payment_past_the_pages_looked_at_is_unknown_not_unmade():
    calls: list[dict[str, Any]] = []
    with pytest.raises(GatewayUnavailable):
        _gateway(calls).made(1, "k3")
    assert len(calls) == INTENT_PAGES


def test_a_key_the_whole_list_does_not_name_was_never_made():
    calls: list[dict[str, Any]] = []
    short = _gateway(calls)
    short.client.v1.payment_intents.list = lambda params: (calls.append(params), _Page(
        data=[{"id": "pi_x", "status": "succeeded", "metadata": {}}], has_more=False))[1]
    assert short.made(1, "k-none") is None and len(calls) == 1
