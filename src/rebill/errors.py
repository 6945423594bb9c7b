"""Typed failures, each carrying the HTTP status it maps to (rendered in one place, ``http/render``).

Exception tree::

    ServiceError                      status, errors (str or {field: [messages]})
    ├── BadRequest            400
    ├── Unauthorized          401     missing or unknown token
    ├── Forbidden             403     missing scope, uninstalled store, plan tier
    ├── NotFound              404     unknown id, or another store's id (decisions §1.1)
    ├── MethodNotAllowed      405
    ├── Conflict              409     overlapping writes (decisions §4.6)
    ├── UnsupportedMediaType  415     body is not a JSON object (decisions §2.3)
    ├── ValidationFailed      422     bad fields, named one by one
    ├── VersionInvalid        426
    ├── RateLimited           429
    ├── NotInThisVersion      501     endpoint of the other version (decisions §2.1)
    └── ServiceUnavailable    503     a third-party service (the payment processor) did not answer
        └── DatabaseUnavailable       the database did not answer (a restart, a failover)

Domain code raises these with field names of the head (2021-11) contract; the 2021-01
contract renames the keys on the way out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Errors = str | dict[str, Any]


class ServiceError(Exception):
    status: int = 500
    default: str = "Internal Server Error"

    def __init__(self, errors: Errors | None = None, *, headers: dict[str, str] | None = None) -> None:
        self.errors: Errors = errors if errors is not None else self.default
        self.headers = headers or {}
        super().__init__(self.errors)


class BadRequest(ServiceError):
    status, default = 400, "Bad Request"


# The HTTP server's own 400, for a request it cannot parse (http/protocol.py): no ServiceError
# is raised for it, since no app sees the request; the message is the same everywhere it is named.
NOT_READABLE_HTTP = ("The request could not be read as HTTP: a request line (method, path and query) over "
                     "64 KiB, or a malformed request line or header")
HEAD_TOO_LARGE = "Request Header Fields Too Large: the header fields of a request may take at most 64 KiB"
REQUEST_TIMEOUT = ("Request Timeout: the request's head did not arrive in time (the connection is closed after "
                   "REBILL_CLIENT_READ_SECONDS without a byte)")
ONE_HOST = "A request of HTTP/1.1 must carry exactly one Host header field (RFC 9112 §3.2)"


class Unauthorized(ServiceError):
    status, default = 401, "Invalid or missing API token"


class Forbidden(ServiceError):
    status, default = 403, "Forbidden"


class NotFound(ServiceError):
    status, default = 404, "Not Found"


class MethodNotAllowed(ServiceError):
    status, default = 405, "Method Not Allowed"


class Conflict(ServiceError):
    status, default = 409, "Conflict: the resource was changed by another request; retry"


class UnsupportedMediaType(ServiceError):
    status, default = 415, "The request body must be a JSON object"


class ValidationFailed(ServiceError):
    status, default = 422, "Unprocessable Entity"

    @classmethod
    def field(cls, name: str, message: str) -> "ValidationFailed":
        return cls({name: [message]})

    @staticmethod
    def collect(errors: dict[str, Any], work: Callable[..., Any], *args: Any, **kw: Any) -> Any:
        """Runs ``work``; its 422 joins ``errors`` and None is returned, so that one request's
        checks name every bad field at once (decisions §2.3)."""
        try:
            return work(*args, **kw)
        except ValidationFailed as exc:
            assert isinstance(exc.errors, dict)
            errors.update(exc.errors)
            return None


class VersionInvalid(ServiceError):
    status, default = 426, "Invalid API version"


class RateLimited(ServiceError):
    status, default = 429, "Too many requests: slow down"


class NotInThisVersion(ServiceError):
    status, default = 501, "This resource is not implemented in the requested API version"


class ServiceUnavailable(ServiceError):
    """NOTE: spec 01 Errors, 503: a service the request depends on (the payment processor) did
    not answer. Nothing is known of the call; repeating it is safe (the same idempotency key)."""

    status, default = 503, "The payment processor could not be reached; try again later"


class DatabaseUnavailable(ServiceUnavailable):
    """The database could not be reached, or dropped the connection mid-request (a restart, a
    failover, a full pool). The transaction rolled back with the connection, so nothing of the
    request was applied, except in the one case no server can rule out: a COMMIT sent just
    before the connection dropped (docs/operations.md, "When the database goes away"). A retry
    with the same Idempotency-Key is the safe way back."""

    default = "The database could not be reached; try again in a moment"

    def __init__(self) -> None:
        super().__init__(headers={"Retry-After": "1"})


def add_error(errors: dict[str, Any], name: str, message: str) -> None:
    errors.setdefault(name, []).append(message)
