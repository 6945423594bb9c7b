"""`rebill openapi`: the OpenAPI document of a version, as `GET /openapi.json` serves it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer

from .common import err


def register(app: typer.Typer) -> None:
    app.command("openapi")(openapi)


def openapi(
    version: str = typer.Option(..., "--version", help="The API version: 2021-01 or 2021-11"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write it to this file (default: stdout)"),
) -> None:
    """Write the OpenAPI 3.1 document of an API version (docs/openapi.md): the same bytes
    `GET /openapi.json` answers. Needs no database."""
    from rebill.api import openapi as documents
    from rebill.api.versions import VERSIONS

    if version not in VERSIONS:
        err.print(f"Unknown API version {version!r}: use one of {', '.join(VERSIONS)}")
        raise typer.Exit(2)
    data = documents.encoded(version)
    if output is None:
        # The bytes alone, no newline after them (found by an audit: `cmp` with the endpoint's failed).
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
        return
    try:
        output.write_bytes(data)
    except OSError as exc:
        err.print(f"[red]cannot write {output}[/red]: {exc.strerror or exc}", soft_wrap=True)
        raise typer.Exit(1) from None
    err.print(f"Wrote the {version} document to {output}")
