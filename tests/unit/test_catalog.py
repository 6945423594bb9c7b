"""The catalog reads other parts of the domain rely on (decisions §5.7, §5.8):
``variant_defaults`` for subscription and one-time items, ``get_plan`` for plan-based items."""

from __future__ import annotations

from decimal import Decimal

import pytest

from rebill.domain.catalog import repository, service
from rebill.domain.catalog.model import ProductCreate, VariantInput
from rebill.domain.unit import Unit
from rebill.errors import NotFound

IMAGES = {"large": "https://img.test/l.png", "medium": "https://img.test/m.png",
          "original": "https://img.test/o.png", "small": "https://img.test/s.png"}


def _unit(api, conn):
    return Unit(conn, api.store, api.clock.now())


def _product(api, **overrides):
    values = {"external_product_id": "7001", "title": "Coffee", "images": IMAGES, "variants": [
        VariantInput(external_variant_id="v1", title="250 g", price=Decimal("12.50"), sku="COF-250", grams=250),
        VariantInput(external_variant_id="v2", title="1 kg", price=Decimal("40"), sku="COF-1K", grams=1000,
                     taxable=False, requires_shipping=False, image="https://img.test/v2.png"),
    ], **overrides}
    with api.db.write() as conn:
        return service.create_product(_unit(api, conn), ProductCreate(**values))


def _plan(api, product, **overrides):
    now = api.clock.now()
    values = {"store_id": api.store.id, "product_id": product.id, "external_product_id": product.external_product_id,
              "title": "Monthly", "type": "subscription", "discount_amount": Decimal("10.00"),
              "discount_type": "percentage", "channel_settings": {}, "sort_order": 0,
              "subscription_preferences": {"charge_interval_frequency": 1, "interval_unit": "month",
                                           "order_interval_frequency": 1},
              "external_variant_ids": ["v1"], "created_at": now, "updated_at": now, **overrides}
    with api.db.write() as conn:
        return repository.insert_plan(conn, values)


def _defaults(api, product_id, variant_id):
    with api.db.read() as conn:
        return service.variant_defaults(_unit(api, conn), product_id, variant_id)


def test_variant_defaults_of_a_named_variant(api):
    _product(api)
    found = _defaults(api, "7001", "v2")
    assert found is not None
    assert (found.external_product_id, found.external_variant_id) == ("7001", "v2")
    assert (found.product_title, found.variant_title) == ("Coffee", "1 kg")
    assert found.price == Decimal("40") and isinstance(found.price, Decimal)
    assert (found.sku, found.grams, found.taxable, found.requires_shipping) == ("COF-1K", 1000, False, False)
    assert found.images == {size: "https://img.test/v2.png" for size in IMAGES}


def test_variant_defaults_without_a_variant_id_take_the_first_variant_and_the_product_images(api):
    _product(api)
    found = _defaults(api, "7001", None)
    assert found is not None
    assert found.external_variant_id == "v1"
    assert found.price == Decimal("12.50")
    assert (found.taxable, found.requires_shipping) == (True, True)
    assert found.images == IMAGES


def test_variant_defaults_of_a_product_without_variants_are_the_products_own(api):
    _product(api, variants=[], taxable=False)
    found = _defaults(api, "7001", None)
    assert found is not None
    assert (found.external_variant_id, found.variant_title, found.price, found.sku) == (None, None, None, None)
    assert found.taxable is False and found.product_title == "Coffee"


def test_variant_defaults_are_none_for_an_unknown_product_variant_or_another_stores_product(api):
    _product(api)
    _product(api.other_store(), external_product_id="8001")
    assert _defaults(api, "9999", None) is None
    assert _defaults(api, "7001", "nope") is None
    assert _defaults(api, "8001", None) is None
    assert _defaults(api.other_store(), "7001", None) is None


def test_get_plan_returns_the_stores_plan_with_its_fields(api):
    product = _product(api)
    plan_id = _plan(api, product)
    with api.db.read() as conn:
        plan = service.get_plan(_unit(api, conn), plan_id)
    assert (plan.id, plan.title, plan.type, plan.external_product_id) == (plan_id, "Monthly", "subscription", "7001")
    assert plan.discount_amount == Decimal("10.00") and plan.discount_type == "percentage"
    assert plan.subscription_preferences["interval_unit"] == "month"
    assert plan.external_variant_ids == ["v1"]


def test_get_plan_of_another_store_or_unknown_raises_not_found(api):
    plan_id = _plan(api, _product(api))
    other = api.other_store()
    with api.db.read() as conn:
        with pytest.raises(NotFound):
            service.get_plan(_unit(other, conn), plan_id)
        with pytest.raises(NotFound):
            service.get_plan(_unit(api, conn), 987654321)
