"""One version's OpenAPI 3.1 document, made from the route table and the version's contract.

Every operation of the route table that the version serves becomes an operation of the
document: its path parameters from the path's convertors, its query parameters from the list
contract its reply names (``api/declared.py``) and its own ``query``, its body from the schema
it declares, its replies from the shapes of the kinds they render (``api/shapes.py``), its
scope as a security requirement, its error statuses from what the dispatcher and the edge can
answer for it. Nothing here is written per endpoint.
"""

from __future__ import annotations

import copy
import inspect
import re
from collections import Counter
from typing import Any

from starlette.routing import compile_path

from rebill.api import includes, shapes
from rebill.api.contract import ListContract, Version
from rebill.api.declared import DELETED, Returns
from rebill.api.listing import CURSOR_KEYS, DEFAULT_LIMIT, MAX_LIMIT, MAX_PAGE
from rebill.api.query import schema_of
from rebill.api.routing import IdConvertor, Operation

from . import bodies
from . import components as c
from .edge_paths import EDGE_PATHS

EXTENSIONS_TAG = "Rebill extensions"
EXTENSION = "x-rebill-extension"
ARRAY_STYLE = {"style": "form", "explode": False}  # `ids=1,2,3`: comma-separated


def _describe(version: Version) -> str:
    other_statuses = "201 on create and 204 on delete" if version.created_status == 201 else \
        "200 on create and 200 `{}` on delete"
    paging = ("Lists answer `next_cursor` and `previous_cursor` in the body; pass one as `cursor` "
              "(with `limit` only) for the next page." if version.cursor_in_body else
              "Lists page by `page` or by cursor: the `Link` header holds the next and previous pages' URLs "
              "with their `page_info`.")
    return (
        f"Rebill speaks the subscription billing REST API in two versions; this document is **{version.name}**, "
        "generated from the route table and the version's contract (docs/openapi.md).\n\n"
        "**Authentication**: every operation but the few marked with no security needs a store's token in "
        "`X-Service-Access-Token`. OpenAPI's apiKey schemes take no scopes, so each operation names the one "
        "scope its token needs in its security requirement (`token: [scope]`), the form OpenAPI 3.1 allows for "
        "any scheme; a `write_X` scope includes `read_X` (docs/scopes.md). A token without it gets 403.\n\n"
        f"**Version**: send `X-Service-Version: {version.name}` (absent: the store's default version). "
        "An endpoint of the other version answers 501; an unknown version 426. "
        f"This version answers {other_statuses}.\n\n"
        f"**Paging**: `limit` (1-{MAX_LIMIT}, default {DEFAULT_LIMIT}), `page` (up to {MAX_PAGE}), "
        f"`sort_by`, `include`. {paging}\n\n"
        "**Errors** have one shape, `{\"errors\": \"message\"}` or `{\"errors\": {\"field\": [\"message\"]}}`; "
        "an unknown path answers 404, another method 405 with `Allow`. Every reply carries `X-Request-Id`, "
        "`X-Service-Version` and, once the token is known, `X-Service-Limit`.\n\n"
        "**Idempotency**: `Idempotency-Key` on any POST replays the first answer for 24 hours.\n\n"
        f"Operations tagged *{EXTENSIONS_TAG}* (`{EXTENSION}: true`) are Rebill's own, not part of the "
        "public API."
    )


def _operation_ids(operations: list[Operation]) -> dict[int, str]:
    """Handler names, stable for generated clients; a handler routed twice adds its method."""
    names = Counter(op.handler.__name__.strip("_") for op in operations)
    return {id(op): op.handler.__name__.strip("_") + ("" if names[op.handler.__name__.strip("_")] == 1
                                                       else f"_{op.method.lower()}") for op in operations}


def _path_parameters(path: str) -> tuple[str, list[dict[str, Any]]]:
    _, template, convertors = compile_path(path)
    params = []
    for name, convertor in convertors.items():
        if isinstance(convertor, IdConvertor):
            schema: dict[str, Any] = {"type": "integer", "minimum": 0, "maximum": 10**18 - 1}
        else:
            schema = {"type": "string", "pattern": f"^{convertor.regex}$"}
        params.append({"name": name, "in": "path", "required": True, "schema": schema})
    return template, params


def _enum_names(schema: dict[str, Any]) -> dict[str, Any]:
    """A string enum whose values differ only in case (`status=ACTIVE` or `active`: the parser
    takes both) names its members with ``x-enum-varnames``, the extension generators read for
    the names of an enum's members: theirs by default (the value in upper case) would clash."""
    values = schema.get("enum")
    if isinstance(values, list) and all(isinstance(v, str) for v in values):
        upper = [v.upper() for v in values]
        if len(set(upper)) < len(upper):
            names: list[str] = []
            for value in values:
                name = re.sub(r"[^A-Za-z0-9]+", "_", value).upper()
                if name in names:  # the second spelling of a value: named by its case
                    name += "_LOWER" if value.islower() else "_UPPER" if value.isupper() else f"_{len(names)}"
                names.append(name)
            schema = {**schema, "x-enum-varnames": names}
    if isinstance(schema.get("items"), dict):
        schema = {**schema, "items": _enum_names(schema["items"])}
    return schema


def _query(name: str, parser: Any, description: str | None = None, *, required: bool = False) -> dict[str, Any]:
    parser = parser[1] if isinstance(parser, tuple) else parser
    schema = _enum_names(schema_of(parser))
    param = {"name": name, "in": "query", "required": required, "schema": schema}
    if schema.get("type") == "array":
        param.update(ARRAY_STYLE)
    if description:
        param["description"] = description
    return param


def _list_parameters(contract: ListContract, version: Version) -> list[dict[str, Any]]:
    # A required filter is required of a first page only: a cursor carries it, and nothing but
    # `limit` may go with a cursor, so the document cannot mark it required (found by an audit:
    # it read as optional).
    params = [_query(name, parser, "Required, unless a cursor is given (the cursor carries it)."
                     if name in contract.required_filters else None) for name, parser in contract.filters.items()]
    sorts = [f"{field}-{direction}" for field in contract.sorts for direction in ("asc", "desc")]
    params.append({"name": "sort_by", "in": "query", "required": False,
                   "schema": {"type": "string", "enum": sorts, "default": contract.default_sort}})
    params += _include_parameters(contract)
    params.append({"name": "limit", "in": "query", "required": False,
                   "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT}})
    params.append({"name": "page", "in": "query", "required": False,
                   "description": f"Page-number paging stops at page {MAX_PAGE}; use the cursors beyond.",
                   "schema": {"type": "integer", "minimum": 1, "maximum": MAX_PAGE, "default": 1}})
    for key in CURSOR_KEYS:
        alias = "" if key == CURSOR_KEYS[0] else f" (the same as `{CURSOR_KEYS[0]}`)"
        params.append({"name": key, "in": "query", "required": False, "schema": {"type": "string"},
                       "description": "A cursor from a previous page" + alias + "; only `limit` may go with it."})
    return params


def _include_parameters(contract: ListContract) -> list[dict[str, Any]]:
    """The values the server embeds; those the spec lists that it answers 422 for (`is not
    available yet`) are named in the description, not in the enum (found by an audit: the
    document called requests valid that always fail)."""
    served = [name for name in contract.includes if name in includes.LOADERS.get(contract.kind, {})]
    if not served:
        return []
    description = "Related objects to embed under each record's `include` (decisions §3.8)."
    later = [name for name in contract.includes if name not in served]
    if later:
        description += " Not available yet (422): " + ", ".join(f"`{name}`" for name in later) + "."
    return [{"name": "include", "in": "query", "required": False, **ARRAY_STYLE, "description": description,
             "schema": {"type": "array", "minItems": 1, "items": {"type": "string", "enum": served}}}]


def _query_parameters(op: Operation, version: Version) -> list[dict[str, Any]]:
    params: list[dict[str, Any]] = []
    for reply in op.reply:
        if reply.page:
            params += _list_parameters(version.lists[reply.page], version)
        elif reply.count:
            contract = version.lists[reply.count]
            params += [_query(name, contract.filters[name], required=name in contract.required_filters)
                       for name in contract.count_filters]
        elif reply.include:
            params += _include_parameters(version.lists[reply.include])
    # A list's filter the path names already (`/customers/{customer_id}/addresses`) is the path's.
    seen: set[str] = set(compile_path(op.path)[2])
    params = [p for p in params if not (p["name"] in seen or seen.add(p["name"]))]  # type: ignore[func-returns-value]
    # The endpoint's own query parameters are all its handler reads, also one named as a path
    # parameter is (found by an audit: 2021-01 payment sources filter by a `customer_id` of the
    # query, spec 02's, and the document left it out).
    own = {name for name, _ in op.query}
    return [p for p in params if p["name"] not in own] + [_query(name, parser) for name, parser in op.query]


class Builder:
    """Builds one version's document; collects the shapes its replies refer to."""

    def __init__(self, version: Version, operations: list[Operation]) -> None:
        self.version = version
        self.operations = [op for op in operations if version.name in op.versions]
        self.ids = _operation_ids(operations)
        self.kinds: set[str] = set()

    def document(self) -> dict[str, Any]:
        paths: dict[str, dict[str, Any]] = {}
        for op in self.operations:
            template, path_params = _path_parameters(op.path)
            paths.setdefault(template, {})[op.method.lower()] = self.operation(op, path_params)
        for template, methods in EDGE_PATHS.items():
            paths[template] = copy.deepcopy(methods)
            for edge_op in paths[template].values():
                _not_readable_http(edge_op["responses"])
        tags = sorted({t for methods in paths.values() for o in methods.values() for t in o.get("tags", ())}
                      - {EXTENSIONS_TAG})
        return {
            "openapi": "3.1.0",
            "info": {"title": "Rebill API", "version": self.version.name, "description": _describe(self.version),
                     "license": {"name": "Rebill"}},
            "servers": [{"url": "/"}],
            "tags": [{"name": t} for t in tags] + [{"name": EXTENSIONS_TAG,
                                                     "description": "Rebill's own endpoints, beyond the public API."}],
            "paths": dict(sorted(paths.items())),
            "components": {
                "securitySchemes": c.SECURITY_SCHEMES,
                "schemas": {**c.ERROR_SCHEMAS, **self.shape_components()},
                "responses": c.error_responses(),
                "headers": c.HEADERS,
                "parameters": c.parameters(self.version.name),
            },
        }

    # Operations ---------------------------------------------------------------------------

    def operation(self, op: Operation, path_params: list[dict[str, Any]]) -> dict[str, Any]:
        version = self.version
        name = op.handler.__name__.strip("_")
        out: dict[str, Any] = {
            "operationId": self.ids[id(op)],
            "summary": name.replace("_", " ").capitalize(),
            "tags": [op.handler.__module__.rsplit(".", 1)[-1]] + ([EXTENSIONS_TAG] if op.extension else []),
        }
        doc = inspect.getdoc(op.handler)
        if doc:
            out["description"] = doc
        out["security"] = [{c.SCHEME: list(op.scopes)}]
        if op.extension:
            out[EXTENSION] = True
        deprecated = version.name in op.deprecated_in
        if deprecated:
            out["deprecated"] = True
        params = [*path_params, *_query_parameters(op, version), {"$ref": "#/components/parameters/Version"}]
        if op.method == "POST":
            params.append({"$ref": "#/components/parameters/IdempotencyKey"})
        out["parameters"] = params
        if op.body is not None:
            schema = op.body.schema_for(version)
            out["requestBody"] = {"required": bodies.body_required(op.body, schema),
                                  "content": {c.JSON: {"schema": bodies.body_schema(op.body, schema)}}}
        out["responses"] = self.responses(op, deprecated)
        return out

    def responses(self, op: Operation, deprecated: bool) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for reply in op.reply:
            status = str(reply.status_in(self.version))
            response = self.success(reply, op)
            if deprecated:
                response["headers"]["Deprecation"] = c.header("Deprecation")
                if op.sunset:
                    response["headers"]["Sunset"] = c.header("Sunset", required=True)
            if status in out:  # two replies of one status: either body
                first = out[status]["content"][c.JSON]["schema"]
                second = response["content"][c.JSON]["schema"]
                out[status]["content"][c.JSON]["schema"] = {"anyOf": [first, second]}
            else:
                out[status] = response
        for status in self.error_statuses(op):
            out[str(status)] = c.error_ref(status)
        return dict(sorted(out.items()))

    def error_statuses(self, op: Operation) -> list[int]:
        """What the edge and the dispatcher can answer for the operation besides its replies."""
        # 500: a failure the server could not answer otherwise (a bug); its body is the error
        # shape and its transaction was rolled back. A write that PostgreSQL gave up on for a
        # concurrent one's sake at every retry answers 409 (api/routing.py Api._in_thread).
        # 400: the HTTP server's own answer to a request it cannot read (components.NOT_HTTP).
        # 503: the database could not be reached (errors.DatabaseUnavailable), on any endpoint.
        statuses = {400, 401, 403, 426, 429, 500, 503, *op.errors}
        reads_body = op.method in ("POST", "PUT", "DELETE")
        has_path_ids = "{" in op.path
        takes_query = any(r.contract() for r in op.reply) or bool(op.query)
        if reads_body:
            statuses |= {409, 413, 415, 422}
        if has_path_ids or op.body is not None:
            statuses.add(404)
        if takes_query or op.body is not None or op.method in ("POST", "GET"):
            # A GET without parameters of its own still answers 422 for an `include` value
            # (decisions §3.8: a record that takes none refuses every value).
            statuses.add(422)
        return sorted(statuses)

    def success(self, reply: Returns, op: Operation) -> dict[str, Any]:
        version = self.version
        headers: dict[str, Any] = {"X-Request-Id": c.header("X-Request-Id"),
                                   "X-Service-Version": c.header("X-Service-Version"),
                                   "X-Service-Limit": c.header("X-Service-Limit", required=True)}
        if reply.status == DELETED and version.deleted_status == 204:
            return {"description": "Deleted; no body.", "headers": headers}
        if reply.status == DELETED:
            schema: dict[str, Any] = {"type": "object", "maxProperties": 0}
            description = "Deleted: an empty object."
        elif reply.page:
            contract = version.lists[reply.page]
            records = {"type": "array", "items": self.ref(contract.kind)}
            if version.cursor_in_body:
                cursor = {"type": ["string", "null"]}
                schema = shapes.obj({reply.page: records, "next_cursor": cursor, "previous_cursor": cursor})
            else:
                schema = shapes.obj({reply.page: records})
                headers["Link"] = c.header("Link")
            description = f"A page of {reply.page}."
        elif reply.count:
            schema = self.ref("count")
            description = f"How many {reply.count} the filters select."
        elif reply.keys:
            item = self.ref(reply.kind or "")
            value = {"type": "array", "items": item} if reply.many else item
            schema = shapes.obj({key: value for key in reply.keys})
            description = f"The {reply.kind}" + (" records." if reply.many else ".")
        else:
            schema = self.ref(reply.kind or "")
            description = f"The {reply.kind}."
        return {"description": description, "headers": headers, "content": {c.JSON: {"schema": schema}}}

    # Shapes -------------------------------------------------------------------------------

    def ref(self, kind: str) -> dict[str, Any]:
        self.kinds.add(kind)
        return shapes.ref(kind)

    def shape_components(self) -> dict[str, Any]:
        """Each kind the replies name, with the kinds they refer to (shapes embedding another kind,
        and what `include` embeds)."""
        declared = self.version.shapes()
        out: dict[str, Any] = {}
        pending = sorted(self.kinds)
        while pending:
            kind = pending.pop()
            name = shapes.component_name(kind)
            if name in out:
                continue
            if kind not in declared:
                raise LookupError(f"no response shape for {kind!r}: declare it (docs/openapi.md)")
            shape = _items_everywhere(copy.deepcopy(declared[kind]))
            if kind in includes.LOADERS:
                shape.setdefault("properties", {})["include"] = self._include_shape(kind)
            out[name] = shape
            pending.extend(k for k in _referred(shape) if shapes.component_name(k) not in out)
        return dict(sorted(out.items()))

    def _include_shape(self, kind: str) -> dict[str, Any]:
        embedded = {}
        for name, (related, _) in includes.LOADERS[kind].items():
            # A name that is its kind's plural (`addresses`) embeds a list; any other (`address`,
            # `bundle_product`) one record or null, as includes.embed renders them.
            embedded[name] = (shapes.array(shapes.ref(related)) if name in (f"{related}s", f"{related}es")
                              else shapes.nullable(shapes.ref(related)))
        return shapes.obj({}, embedded, description="The related records asked for with `include`.")


def _not_readable_http(responses: dict[str, Any]) -> None:
    """The HTTP server's own 400 (components.NOT_HTTP) beside an edge path's replies: under a
    400 the path answers itself too (the same error shape), its description says both."""
    if "400" not in responses:
        responses["400"] = c.error_ref(400)
    else:
        own = responses["400"]
        responses["400"] = {**own, "description": f"{own['description']} Or: {c.NOT_HTTP_RESPONSE['description']}"}


def _items_everywhere(shape: Any) -> Any:
    """Every array says what its items are: `{}` (anything) where a shape left it open
    (`utm_params`, an event's `custom_attributes`). The same in JSON Schema, but generators
    (openapi-python-client) drop a whole component over an array without ``items``."""
    stack = [shape]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            if item.get("type") == "array" and "items" not in item and "prefixItems" not in item:
                item["items"] = {}
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return shape


def _referred(shape: Any) -> list[str]:
    """The kinds a shape refers to with ``shapes.ref``."""
    found: list[str] = []
    stack = [shape]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            target = item.get("$ref")
            if isinstance(target, str) and target.startswith(shapes.COMPONENTS):
                found.append(_kind_of(target[len(shapes.COMPONENTS):]))
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return found


def _kind_of(component: str) -> str:
    """``AsyncBatchTask`` -> ``async_batch_task`` (the inverse of ``shapes.component_name``)."""
    return "".join(f"_{ch.lower()}" if ch.isupper() else ch for ch in component).lstrip("_")
