"""`rebill migrate`."""

from __future__ import annotations

from typing import Optional

import typer

from rebill.db.migrate import upgrade
from rebill.settings import shown_url

from .common import DatabaseOption, err, settings_for


def register(app: typer.Typer) -> None:
    app.command()(migrate)


def migrate(database: Optional[str] = DatabaseOption) -> None:
    """Apply database migrations."""
    settings = settings_for(database)
    upgrade(settings.database_url)
    err.print(f"[green]migrated[/green] {shown_url(settings.database_url)}")
