"""`GET /openapi.json` and `GET /docs`: the OpenAPI document of a version and its reference page
(issue 17, docs/openapi.md). Served by the edge without a token (``http/edge.py``), like the
processor's webhook path: a client reads the reference before it has a token.

- `/openapi.json`: the version `?version=` names (422 when it names none of ours), else the
  one `X-Service-Version` names (426 when unknown, as the API answers), else the newest: there
  is no store whose default could apply.
- `/docs`: Swagger UI 5 (which reads OpenAPI 3.1) from the swagger-ui-py package, its page and
  its assets served from the package directory (`/docs/static/...`): no network at run time, no
  call to an online validator. Its version switch lists both documents.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from urllib.parse import parse_qs

from starlette.types import Scope, Send

from rebill.api import openapi
from rebill.api.openapi.edge_paths import DOCS_ASSETS, DOCS_PATH, DOCUMENT_PATH
from rebill.api.versions import FALLBACK_VERSION, VERSIONS
from rebill.errors import MethodNotAllowed, NotFound, ServiceError, ValidationFailed, VersionInvalid

from .render import send_error

# The assets the page loads (swagger-ui-py's template), nothing else of the package's directory.
ASSETS = {
    "swagger-ui.css": b"text/css; charset=utf-8",
    "index.css": b"text/css; charset=utf-8",
    "swagger-ui-bundle.js": b"application/javascript; charset=utf-8",
    "swagger-ui-standalone-preset.js": b"application/javascript; charset=utf-8",
    "favicon-32x32.png": b"image/png",
    "favicon-16x16.png": b"image/png",
}


def is_docs_path(path: str) -> bool:
    return path == DOCUMENT_PATH or path == DOCS_PATH or path.startswith(DOCS_ASSETS)


def chosen_version(query_string: bytes, asked: str | None) -> str:
    """The version whose document is asked for (module docstring); raises 422 or 426."""
    named = parse_qs(query_string.decode("latin-1")).get("version")
    if named:
        # Sent twice with two values: neither is taken (api/call.py joins them the same way).
        chosen = ",".join(dict.fromkeys(named))
        if chosen not in VERSIONS:
            raise ValidationFailed.field("version", f"must be one of {', '.join(VERSIONS)}")
        return chosen
    if asked:
        if asked not in VERSIONS:
            raise VersionInvalid(f"Invalid API version: {asked}. Use one of {', '.join(VERSIONS)}")
        return asked
    return openapi.NEWEST


def _static_dir() -> Path:
    import swagger_ui  # a heavy import (jinja2, yaml): only once the page is asked for

    return Path(swagger_ui.__file__).resolve().parent / "static"


@lru_cache(maxsize=None)
def page() -> bytes:
    """The reference page: swagger-ui-py's template with both documents in the version switch."""
    from swagger_ui.core import ApplicationDocument

    urls = [{"url": f"{DOCUMENT_PATH}?version={name}", "name": name} for name in sorted(VERSIONS, reverse=True)]
    doc = ApplicationDocument(None, app_type="starlette", config_rel_url=DOCUMENT_PATH, url_prefix=DOCS_PATH,
                              title="Rebill API reference", parameters={
                                  "urls": json.dumps(urls),
                                  '"urls.primaryName"': json.dumps(openapi.NEWEST),
                                  "validatorUrl": "null",  # no call to the online validator
                                  "persistAuthorization": "true",
                              })
    doc.parameters.pop("url", None)  # `urls` lists the documents
    return doc.doc_html.encode()


@lru_cache(maxsize=None)
def asset(name: str) -> bytes:
    return (_static_dir() / name).read_bytes()


async def _send(send: Send, method: str, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    headers = [*headers, (b"content-length", b"%d" % len(body))]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if method == "HEAD" else body})


async def serve(scope: Scope, send: Send, asked_version: str | None, headers: list[tuple[bytes, bytes]]) -> None:
    """Answers a path of ``is_docs_path`` (the edge has set the request id in ``headers``).
    NOTE: decisions §2.8, every response names a version: the document's its own, the others
    (the page, its assets, every error) the one asked when it is valid, else the fallback, as
    the edge's 426 does (found by an audit: only the document's 200 had the header)."""
    path, method = scope["path"], scope["method"]
    named = (b"x-service-version", (asked_version if asked_version in VERSIONS else FALLBACK_VERSION).encode())
    try:
        if method not in ("GET", "HEAD"):
            raise MethodNotAllowed(headers={"Allow": "GET, HEAD"})
        if path == DOCUMENT_PATH:
            version = chosen_version(scope["query_string"], asked_version)
            await _send(send, method, 200, [*headers, (b"x-service-version", version.encode()),
                                            (b"content-type", b"application/json")], openapi.encoded(version))
        elif path == DOCS_PATH:
            await _send(send, method, 200, [*headers, named, (b"content-type", b"text/html; charset=utf-8")], page())
        else:
            name = path[len(DOCS_ASSETS):]
            if name not in ASSETS:
                raise NotFound()
            await _send(send, method, 200, [*headers, named, (b"content-type", ASSETS[name]),
                                            (b"cache-control", b"public, max-age=86400")], asset(name))
    except ServiceError as exc:
        await send_error(send, exc, [*headers, named])
