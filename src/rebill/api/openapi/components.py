"""The parts every operation shares: the token scheme, the error shape and its responses, the
headers every reply carries, `Idempotency-Key`, the version header (http/render.py,
rebill/errors.py, http/edge.py, api/idempotency.py)."""

from __future__ import annotations

from typing import Any

from rebill.errors import (
    NOT_READABLE_HTTP,
    Conflict,
    Forbidden,
    MethodNotAllowed,
    NotFound,
    NotInThisVersion,
    RateLimited,
    ServiceError,
    ServiceUnavailable,
    Unauthorized,
    UnsupportedMediaType,
    ValidationFailed,
    VersionInvalid,
)

SCHEME = "token"
JSON = "application/json"

ERROR_SCHEMAS: dict[str, Any] = {
    # NOTE: decisions §2.2, every error: {"errors": "message"} or {"errors": {"field": ["message"]}},
    # nested for the fields of an object or the items of a list ({"plans": {"3": {...}}}).
    "Error": {
        "type": "object",
        "required": ["errors"],
        "properties": {"errors": {"anyOf": [{"type": "string"}, {"$ref": "#/components/schemas/FieldErrors"}]}},
        "additionalProperties": False,
    },
    "FieldErrors": {
        "type": "object",
        "additionalProperties": {"anyOf": [{"type": "array", "items": {"type": "string"}},
                                           {"$ref": "#/components/schemas/FieldErrors"}]},
    },
}

HEADERS: dict[str, Any] = {
    "X-Request-Id": {"description": "Unique per request (decisions §9.1); quote it when reporting a problem.",
                     "required": True, "schema": {"type": "string", "pattern": "^[0-9a-f]{32}$"}},
    "X-Service-Version": {"description": "The API version that answered.", "required": True,
                          "schema": {"type": "string"}},
    "X-Service-Limit": {"description": "The token's leaky bucket: drops used / bucket size (decisions §2.8). "
                                       "Absent when no token was recognised.",
                        "schema": {"type": "string", "pattern": "^[0-9]+/[0-9]+$"}},
    "Retry-After": {"description": "Seconds to wait: before the bucket takes another request (429), or "
                                   "before the database is tried again (503).",
                    "schema": {"type": "integer", "minimum": 0}},
    "Allow": {"description": "The methods the path takes.", "required": True, "schema": {"type": "string"}},
    "Link": {"description": "2021-01 cursor paging (spec 02): absolute URLs of the next and previous pages, "
                            "each with `limit` and `page_info`; absent when there is no other page.",
             "schema": {"type": "string"}},
    "Deprecation": {"description": "`true`: the endpoint is deprecated in this version (spec 01 Versioning).",
                    "required": True, "schema": {"type": "string", "enum": ["true"]}},
    "Sunset": {"description": "The HTTP date the endpoint is retired.", "schema": {"type": "string"}},
}


def header(name: str, *, required: bool | None = None) -> dict[str, Any]:
    if required is None:
        return {"$ref": f"#/components/headers/{name}"}
    return {**HEADERS[name], "required": required}


# status -> (component name, the error class whose default message describes it, extra headers)
ERRORS: dict[int, tuple[str, type, tuple[str, ...]]] = {
    401: ("Unauthorized", Unauthorized, ()),
    403: ("Forbidden", Forbidden, ()),
    404: ("NotFound", NotFound, ()),
    405: ("MethodNotAllowed", MethodNotAllowed, ("Allow",)),
    409: ("Conflict", Conflict, ()),
    413: ("PayloadTooLarge", ServiceError, ()),  # http/edge.py PayloadTooLarge
    415: ("UnsupportedMediaType", UnsupportedMediaType, ()),
    422: ("ValidationFailed", ValidationFailed, ()),
    426: ("VersionInvalid", VersionInvalid, ()),
    429: ("RateLimited", RateLimited, ("Retry-After",)),
    500: ("InternalError", ServiceError, ()),
    501: ("NotInThisVersion", NotInThisVersion, ()),
    503: ("ServiceUnavailable", ServiceUnavailable, ("Retry-After",)),
}
DESCRIPTIONS = {
    401: "No token, or a token that is not (or no longer) valid.",
    403: "The token lacks the endpoint's scope, the store is not installed, or the store's plan tier or "
         "platform does not allow the endpoint.",
    404: "No such record in this store (another store's ids are unknown too, decisions §1.1).",
    409: "Another request changed the record at the same moment, or a request with the same "
         "Idempotency-Key is still running: retry.",
    413: "The body is larger than the edge takes (http/edge.py MAX_BODY_BYTES, 1 MiB).",
    415: "The body is not one JSON object (decisions §2.3).",
    422: "Bad fields or parameters, each named with its messages (decisions §2.3).",
    426: "An unknown API version in X-Service-Version.",
    429: "Rate limited: the token's bucket is full (decisions §2.8).",
    500: "An unexpected failure (a bug): nothing of the request was kept (its transaction rolled back); "
         "repeat it with the same Idempotency-Key.",
    501: "The endpoint exists in the other API version only (decisions §2.1).",
    503: "The database could not be reached (a restart, a failover; `Retry-After` says when to try again, "
         "nothing of the request was applied) or, on endpoints that charge, the payment processor did not "
         "answer (nothing is known of the call). Repeating the request with the same Idempotency-Key is safe.",
}


def error_responses() -> dict[str, Any]:
    out = {}
    for status, (name, cls, extra) in ERRORS.items():
        headers = {"X-Request-Id": header("X-Request-Id"), "X-Service-Version": header("X-Service-Version"),
                   "X-Service-Limit": header("X-Service-Limit"),
                   # Always sent with a 429; with a 503 only when the database was away.
                   **{h: header(h, required=status == 429) for h in extra}}
        example = {"errors": {"email": ["is required"]}} if status == 422 else {"errors": cls.default}
        if status == 413:
            from rebill.http.edge import PayloadTooLarge  # the edge imports the API: not at import time
            example = {"errors": PayloadTooLarge().errors}
        out[name] = {"description": DESCRIPTIONS.get(status, cls.default), "headers": headers,
                     "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}, "example": example}}}
    out[NOT_HTTP] = NOT_HTTP_RESPONSE
    return out


# What the HTTP server answers itself, before the app sees the request, when it cannot read it as
# HTTP: a request line (method, path and query) past 64 KiB, a header it refuses. The error shape
# with a request id (http/protocol.py), but no version or limit: nothing read the headers.
NOT_HTTP = "NotReadableHttp"
NOT_HTTP_RESPONSE = {
    "description": "The HTTP server could not read the request (a path and query over 64 KiB, a malformed "
                   "request line or header) and answered before the API saw it; the connection closes.",
    "headers": {"X-Request-Id": header("X-Request-Id")},
    "content": {JSON: {"schema": {"$ref": "#/components/schemas/Error"}, "example": {"errors": NOT_READABLE_HTTP}}},
}


def error_ref(status: int) -> dict[str, Any]:
    if status == 400:
        return {"$ref": f"#/components/responses/{NOT_HTTP}"}
    return {"$ref": f"#/components/responses/{ERRORS[status][0]}"}


def parameters(version: str) -> dict[str, Any]:
    return {
        "IdempotencyKey": {
            "name": "Idempotency-Key", "in": "header", "required": False,
            "description": "The first answer to a key is replayed to its repeats for 24 hours "
                           "(docs/api-choices.md, Idempotency keys; a Rebill extension).",
            "schema": {"type": "string", "minLength": 1, "maxLength": 255, "pattern": "^[\\x20-\\x7E]+$"},
        },
        "Version": {
            "name": "X-Service-Version", "in": "header", "required": False,
            "description": "The API version; absent, the store's default version answers. "
                           f"This document describes {version}.",
            "schema": {"type": "string", "enum": [version]},
        },
    }


SECURITY_SCHEMES = {
    SCHEME: {
        "type": "apiKey", "in": "header", "name": "X-Service-Access-Token",
        "description": "A store's API token (`rebill tokens create`). Each operation lists the one scope it "
                       "needs in its security requirement; a `write_X` scope includes `read_X`.",
    },
}
