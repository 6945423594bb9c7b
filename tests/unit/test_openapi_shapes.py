"""Response shapes (api/shapes.py, api/v2021_11/shapes/, docs/openapi.md): every kind a serializer
renders and every reply shape a route names is declared in its family; 2021-01 shapes come from the
change modules; a kind without a shape stops the document instead of passing for declared."""

from __future__ import annotations

import pytest

from rebill.api import shapes
from rebill.api.contract import Change, Rename, derive
from rebill.api.v2021_11 import contract as head
from rebill.api.v2021_11.shapes import MODULES, SHAPES
from rebill.api.versions import VERSIONS
from rebill.app import RESOURCES

OPERATIONS = [op for module in RESOURCES for op in module.endpoints.operations]


def _family_kinds() -> dict[str, set[str]]:
    """Family name -> the kinds its head serializers render (customers and the store: serializers.py)."""
    from rebill.api.v2021_11 import serializers
    kinds = {module.__name__.rsplit(".", 1)[-1]: set(module.SERIALIZERS) for module in head.FAMILIES}
    kinds["customers"] = {"customer", "address"}
    kinds["store"] = set(serializers.SERIALIZERS) - {"customer", "address"}
    return kinds


def _reply_shapes() -> set[str]:
    return {reply.kind for op in OPERATIONS for reply in op.reply if reply.kind} | {"count"}


def test_each_family_declares_every_kind_it_renders():
    for module in MODULES:
        family = module.__name__.rsplit(".", 1)[-1]
        missing = _family_kinds()[family] - set(module.SHAPES)
        assert not missing, f"{family}: declare {sorted(missing)}"


def test_every_kind_and_reply_shape_is_declared_and_every_shape_is_used():
    named = set(head.VERSION.serializers) | _reply_shapes()
    assert named - set(SHAPES) == set()
    assert set(SHAPES) - named == set(), "a shape nothing renders"


def test_a_kind_without_a_shape_stops_the_document():
    from rebill.api.openapi.build import Builder
    version = derive(head.VERSION, name="old", changes=(), lists=head.VERSION.lists, created_status=200,
                     deleted_status=200, cursor_in_body=False)
    version._shapes = {k: v for k, v in head.VERSION.shapes().items() if k != "charge"}
    builder = Builder(version, [])
    builder.ref("charge")
    with pytest.raises(LookupError, match="charge"):
        builder.shape_components()


def test_2021_01_shapes_are_the_head_through_the_change_modules():
    new, old = VERSIONS["2021-11"].shapes(), VERSIONS["2021-01"].shapes()
    customer = old["customer"]["properties"]
    assert customer["created_at"] == shapes.datetime_naive()
    assert customer["first_charge_processed_at"] == shapes.nullable(shapes.datetime_naive())
    assert "platform_customer_id" in customer and "external_customer_id" not in customer
    assert customer["status"]["enum"] == ["ACTIVE", "INACTIVE"]
    assert "number_subscriptions" in old["customer"]["required"] and "tax_exempt" not in customer
    address = old["address"]["properties"]
    assert "note_attributes" in address and "order_attributes" not in address and "cart_attributes" in address
    assert address["original_shipping_lines"]["type"] == "array"  # never null in 2021-01
    assert old["store"]["properties"]["timezone"] == {"type": "string"}
    # The head is left as it was.
    assert new["customer"]["properties"]["created_at"] == shapes.datetime_offset()
    assert "external_customer_id" in new["customer"]["properties"]


def test_a_change_that_rewrites_replies_must_say_how_their_shape_changes():
    class Unsaid(Change):
        kinds = ("customer",)

        def response(self, data, obj):
            return data

    version = derive(head.VERSION, name="old", changes=(Unsaid(),), lists={}, created_status=200,
                     deleted_status=200, cursor_in_body=False)
    with pytest.raises(NotImplementedError, match="Unsaid"):
        version.shapes()


def test_rename_says_it_of_the_shape_too():
    shape = shapes.obj({"order_note": shapes.nullable(shapes.string()), "id": shapes.integer()})
    renamed = Rename(("address",), "order_note", "cart_note").response_shape(shape)
    assert set(renamed["properties"]) == {"cart_note", "id"} and renamed["required"] == ["cart_note", "id"]


def test_the_builders():
    assert shapes.nullable(shapes.string()) == {"type": ["string", "null"]}
    assert shapes.nullable(shapes.ref("customer")) == {"anyOf": [{"$ref": "#/components/schemas/Customer"},
                                                                 {"type": "null"}]}
    assert shapes.nullable(shapes.enum("a", "b"))["enum"] == ["a", "b", None]
    assert shapes.non_null(shapes.nullable(shapes.array())) == {"type": "array"}
    closed = shapes.obj({"b": shapes.integer()}, {"a": shapes.string()})
    assert closed["required"] == ["b"] and list(closed["properties"]) == ["a", "b"]
    assert closed["additionalProperties"] is False
    naive = shapes.naive_datetimes(shapes.obj({"at": shapes.nullable(shapes.datetime_offset())}), ["at"])
    assert naive["properties"]["at"] == {"type": ["string", "null"], "pattern": shapes.NAIVE_PATTERN}
    assert shapes.component_name("async_batch_task") == "AsyncBatchTask"
