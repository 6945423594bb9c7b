"""The ``rebill`` command line: serve, worker, migrate, stores, tokens, the schedule, billing, the
test clock, the event log, webhooks and the OpenAPI document. Each command module adds its commands (or its
group) to the root app itself."""

from __future__ import annotations

from importlib import import_module

import typer

# Every command that records events (billing, the test clock, rates) fans them out to webhooks,
# whose payloads the API's serializers render (domain/webhook/fanout.py).
from rebill.api import payloads  # noqa: F401

app = typer.Typer(help="Rebill: self-hostable subscription billing (API 2021-01 and 2021-11).",
                  no_args_is_help=True)

# The command modules: a group's module holds its named Typer as ``app``; a module of plain
# commands adds them with ``register(app)``. A new group is one module and its name here. The
# order is the order of `rebill --help` (Typer lists plain commands, then groups).
COMMANDS = ("migrate", "serve", "worker", "billing", "openapi", "stores", "tokens", "schedule", "clock", "events", "webhooks")

for _name in COMMANDS:
    _module = import_module(f"{__name__}.{_name}")
    if hasattr(_module, "register"):
        _module.register(app)
    else:
        app.add_typer(_module.app)


def main() -> None:
    from .common import database_problem, err
    try:
        app()
    except Exception as exc:
        said = database_problem(exc)
        if said is None:
            raise
        err.print(f"[red]{said}[/red]", soft_wrap=True)
        raise SystemExit(1) from None
