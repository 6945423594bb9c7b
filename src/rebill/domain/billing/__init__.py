"""Making money move (decisions §6.3-§6.5): due charges are claimed, paid through the gateway
and their outcome recorded, each step safe to repeat (design guide, "The billing engine").

- ``claim.py``: which charges are due, and the claim only one run can win;
- ``run.py``: claim, pay, record, for a batch of charges and for a whole billing run;
- ``outcome.py``: what a payment's result does to the charge, its items, orders and schedule;
- ``dunning.py``: when a failed charge is tried again, and when it stops;
- ``access.py``: the plan tier a charge action needs and the charge as the store sees it,
  shared by ``manual.py`` and ``money_back.py``;
- ``due.py``: when a store's work next falls due, which a test clock advance (``travel.py``)
  jumps to.

Imports between these modules go one way (no cycle: tests/unit/test_layering.py).
"""
