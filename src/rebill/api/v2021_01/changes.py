"""How 2021-01 differs from the head, one change module per difference (design guide).

Each class's docstring is its changelog line. Requests pass old -> head through
``request``; responses pass head -> old through ``response``, and their shapes (the OpenAPI
document's, ``api/shapes.py``) through ``response_shape``, which says the same difference.
"""

from __future__ import annotations

from typing import Any

from rebill.api import shapes as sh
from rebill.api.contract import Change, Rename
from rebill.api.fields import Field, Schema
from rebill.api.v2021_11.serializers import store_domain
from rebill.domain.customer.model import BILLING_REQUIRED
from rebill.domain.geo import country_code_for_name, country_name
from rebill.domain.payment_method.model import CUSTOMER_TOKEN_TYPES, card_data_problem


def _country_to_code(value: str) -> str:
    code = country_code_for_name(value)
    if code is None:
        raise ValueError("is not a known country")
    return code


class NaiveDatetimes(Change):
    """Datetimes render as `YYYY-MM-DDTHH:MM:SS` in UTC with no offset (decisions §2.4)."""

    kinds = ("customer", "address", "payment_method", "discount", "store", "store_clock")
    # By name, never by look: a customer may well be called "2026-01-15T12:00:00+00:00".
    fields = ("created_at", "updated_at", "first_charge_processed_at", "starts_at", "ends_at", "now")

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        for key in self.fields:
            value = data.get(key)
            if value is not None and value.endswith("+00:00"):
                data[key] = value[:-6]
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        return sh.naive_datetimes(shape, self.fields)


class AddressCountryName(Change):
    """Addresses carry `country` (the name) beside `country_code`; either is accepted (decisions §4.5)."""

    kinds = ("address",)

    def request(self, schema: Schema) -> Schema:
        return schema.changed("country_code", required=False).plus(
            Field("country", "str", key="country_code", nullable=False, convert=_country_to_code),
            one_of=(("country", "country_code"),),
        )

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data["country"] = country_name(data["country_code"])
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        return sh.add(shape, {"country": sh.string()})

    def error_names(self) -> dict[str, str]:
        return {"country_code": "country"}


class AddressDiscountId(Change):
    """Addresses show their one discount as `discount_id` instead of a `discounts` array;
    it is set through apply_discount, not the address body."""

    kinds = ("address",)

    def request(self, schema: Schema) -> Schema:
        return schema.without("discounts")

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        applied = data.pop("discounts")
        data["discount_id"] = applied[0]["id"] if applied else None
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        return sh.add(sh.drop(shape, "discounts"), {"discount_id": sh.nullable(sh.integer())})


class AddressDeprecatedAliases(Change):
    """Addresses still take and show the deprecated `cart_attributes` (= `note_attributes`) and
    `original_shipping_lines` (= `shipping_lines_override`, `[]` where that is null); they have
    no `payment_method_id` and do not show the conserved rates."""

    kinds = ("address",)

    def request(self, schema: Schema) -> Schema:
        by_name = {f.name: f for f in schema.fields}
        aliases = []
        if "note_attributes" in by_name:
            note = by_name["note_attributes"]
            aliases.append(Field("cart_attributes", "list", nullable=False, key=note.target, items=note.items))
        if "shipping_lines_override" in by_name:
            lines = by_name["shipping_lines_override"]
            # It shows `[]` for no override, so `[]` sent means none (found by an audit: the
            # address sent back as shown lost its shipping, or answered a conflict).
            aliases.append(Field("original_shipping_lines", "list", key=lines.target, items=lines.items,
                                 convert=lambda value: value or None, yields=True))
        return schema.without("payment_method_id").plus(*aliases)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data.pop("payment_method_id", None)
        data["cart_attributes"] = data.get("note_attributes", [])
        data.pop("shipping_lines_conserved", None)
        # NOTE: 03-real-fields address (2021-01), an array: clients with strict models refuse
        # null, so an address without an override shows none (issue 15).
        data["original_shipping_lines"] = data.get("shipping_lines_override") or []
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        props = shape["properties"]
        notes = props.get("note_attributes", sh.array())
        lines = sh.non_null(props.get("shipping_lines_override", sh.array()))
        sh.drop(shape, "payment_method_id", "shipping_lines_conserved")
        return sh.add(shape, {"cart_attributes": notes, "original_shipping_lines": lines})


class CustomerPlatformId(Change):
    """Customers carry the flat `platform_customer_id` string instead of `external_customer_id{ecommerce}`."""

    kinds = ("customer",)

    def request(self, schema: Schema) -> Schema:
        return schema.without("external_customer_id").plus(
            Field("platform_customer_id", "external_id", key="external_customer_id", max_length=64))

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data["platform_customer_id"] = data.pop("external_customer_id")["ecommerce"]
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        return sh.add(sh.drop(shape, "external_customer_id"), {"platform_customer_id": sh.nullable(sh.string())})

    def error_names(self) -> dict[str, str]:
        return {"external_customer_id": "platform_customer_id"}


BILLING = ("address1", "address2", "city", "company", "first_name", "last_name", "phone", "province", "zip")


class CustomerBillingAddress(Change):
    """Customers carry the flat `billing_*` address (spec 02), `billing_country` as a name;
    creating one requires it. 2021-11 moved billing details to payment methods."""

    kinds = ("customer",)

    def request(self, schema: Schema) -> Schema:
        limits = {"phone": 64, "zip": 32}
        # An update may send a required one as null: the domain refuses that only where the
        # customer has a value (a customer with no billing address sent back as shown, nulls
        # and all, is no change; found by an audit: it was 422).
        fields = [Field(f"billing_{name}", "str", required=name in BILLING_REQUIRED, null_on_update=True,
                        min_length=1 if name in BILLING_REQUIRED else None, max_length=limits.get(name, 255))
                  for name in BILLING]
        fields.append(Field("billing_country", "str", required=True, nullable=False, null_on_update=True,
                            key="billing_country_code", convert=_country_to_code))
        return schema.plus(*fields)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        billing = obj.billing_address or {}
        for name in BILLING:
            data[f"billing_{name}"] = billing.get(name)
        code = billing.get("country_code")
        data["billing_country"] = country_name(code) if code else None
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        names = [f"billing_{name}" for name in BILLING] + ["billing_country"]
        return sh.add(shape, {name: sh.nullable(sh.string()) for name in names})

    def error_names(self) -> dict[str, str]:
        return {"billing_country_code": "billing_country"}


class CustomerStatusAndCounts(Change):
    """Customers show upper-case `status` (ACTIVE/INACTIVE, decisions §2.9),
    `number_active_subscriptions`/`number_subscriptions`, `has_card_error_in_dunning`,
    `accepts_marketing`, `processor_type` (also writable), `reason_payment_method_not_valid`; no
    `tax_exempt` or `orders_count`."""

    kinds = ("customer",)

    def request(self, schema: Schema) -> Schema:
        return schema.plus(Field("processor_type", "str", max_length=32))

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        data["status"] = obj.status.upper()
        data["number_active_subscriptions"] = data.pop("subscriptions_active_count")
        data["number_subscriptions"] = data.pop("subscriptions_total_count")
        data["has_card_error_in_dunning"] = data.pop("has_payment_method_in_dunning")
        data["accepts_marketing"] = obj.accepts_marketing
        # Where the processor customer is kept: as set, else the default payment method's processor.
        data["processor_type"] = obj.processor_type or obj.default_method_processor
        # NOTE: decisions §6.12, derived from the customer's payment methods (domain/customer/model.py).
        data["reason_payment_method_not_valid"] = obj.reason_payment_method_not_valid
        data.pop("tax_exempt", None)
        data.pop("orders_count", None)
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        sh.rename(shape, "subscriptions_active_count", "number_active_subscriptions")
        sh.rename(shape, "subscriptions_total_count", "number_subscriptions")
        sh.rename(shape, "has_payment_method_in_dunning", "has_card_error_in_dunning")
        sh.drop(shape, "tax_exempt", "orders_count")
        return sh.add(shape, {"status": sh.enum("ACTIVE", "INACTIVE"), "accepts_marketing": sh.boolean(),
                              "processor_type": sh.nullable(sh.string()),
                              "reason_payment_method_not_valid": sh.nullable(sh.string())})


AUTHORIZE = "authorizedotnet"
AUTHORIZE_FIELDS = ("authorizedotnet_profile_id", "authorizedotnet_payment_profile_id")


class CustomerProcessorTokens(Change):
    """Customers still show the deprecated processor tokens `stripe_customer_token`,
    `braintree_customer_token` and `paypal_customer_token` (payment methods hold them,
    decisions §6.1: the default method's customer token, when it is that processor's), and
    create and update take them (spec 02 Customers): a tokenized customer, not card data, kept on
    the customer's payment method of that processor; writing one needs `write_payment_methods`
    (api/resources/customers.py). The "two authorize-type profile ids" of spec 02 are shown
    (not taken) as `authorizedotnet_profile_id` and `authorizedotnet_payment_profile_id` (the
    names clients of the real service send; spec 02 leaves them out): an Authorize.Net default
    method's customer and payment method tokens. They have no `apply_credit_to_next_*` flags."""

    kinds = ("customer",)
    TOKENS = tuple(CUSTOMER_TOKEN_TYPES)

    def request(self, schema: Schema) -> Schema:
        # Null is taken as no token (docs/api-choices.md, Customers): nothing is written or removed.
        return schema.plus(*(Field(f"{p}_customer_token", "str", min_length=1, check=card_data_problem)
                             for p in self.TOKENS))

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        for processor in self.TOKENS:
            data[f"{processor}_customer_token"] = obj.customer_token(processor)
        data["authorizedotnet_profile_id"] = obj.customer_token(AUTHORIZE)
        data["authorizedotnet_payment_profile_id"] = obj.payment_token(AUTHORIZE)
        data.pop("apply_credit_to_next_checkout_charge", None)
        data.pop("apply_credit_to_next_recurring_charge", None)
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        sh.drop(shape, "apply_credit_to_next_checkout_charge", "apply_credit_to_next_recurring_charge")
        names = [*(f"{p}_customer_token" for p in self.TOKENS), *AUTHORIZE_FIELDS]
        return sh.add(shape, {name: sh.nullable(sh.string()) for name in names})


# NOTE: spec 03 shop (2021-01), `enabled_presentment_currencies_symbols[].symbol`. Currencies not
# listed show their code as the symbol.
CURRENCY_SYMBOLS = {
    "AED": "د.إ", "ARS": "$", "AUD": "$", "BRL": "R$", "CAD": "$", "CHF": "CHF", "CLP": "$", "CNY": "¥",
    "COP": "$", "CZK": "Kč", "DKK": "kr", "EUR": "€", "GBP": "£", "HKD": "$", "HUF": "Ft", "IDR": "Rp",
    "ILS": "₪", "INR": "₹", "ISK": "kr", "JPY": "¥", "KRW": "₩", "MXN": "$", "MYR": "RM", "NOK": "kr",
    "NZD": "$", "PHP": "₱", "PLN": "zł", "RON": "lei", "RUB": "₽", "SAR": "ر.س", "SEK": "kr", "SGD": "$",
    "THB": "฿", "TRY": "₺", "TWD": "NT$", "UAH": "₴", "USD": "$", "VND": "₫", "ZAR": "R",
}


class StoreAsShop(Change):
    """The store (`GET /shop`, under both `shop` and `store`) shows `timezone` as the display
    string with `iana_timezone` beside it, and the shop fields of spec 03: `domain`,
    `my_platform_domain`, `platform_domain`, `customer_portal_domain` (instead of `identifier` and
    the portal base URLs), `shop_email`, `shop_phone`, `test_mode`, `subscriptions_enabled`,
    `allow_customers_to_skip_delivery`, `enabled_presentment_currencies_symbols`,
    `disabled_currencies_historical`, `payment_processor`."""

    kinds = ("store",)

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        zone = data.pop("timezone")
        data["timezone"] = zone["name"]
        data["iana_timezone"] = zone["iana_name"]
        for name in ("identifier", "customer_portal_base_url", "merchant_portal_base_url"):
            data.pop(name, None)
        domain = store_domain(obj)
        data["domain"] = data["my_platform_domain"] = data["platform_domain"] = domain
        data["customer_portal_domain"] = domain
        data["shop_email"] = data["email"]
        data["shop_phone"] = data["phone"]
        data["test_mode"] = obj.sandbox
        # Integers, not booleans, as the real service sends them (spec 03).
        data["subscriptions_enabled"] = 1
        data["allow_customers_to_skip_delivery"] = 1
        data["enabled_presentment_currencies_symbols"] = [
            {"currency": code, "location": "before", "suffix": "", "symbol": CURRENCY_SYMBOLS.get(code, code)}
            for code in data["enabled_presentment_currencies"]]
        data["disabled_currencies_historical"] = []
        # NOTE: decisions §6.2, the built-in gateway; a store-level processor setting comes with payments.
        data["payment_processor"] = "sandbox"
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        sh.drop(shape, "timezone", "identifier", "customer_portal_base_url", "merchant_portal_base_url")
        symbol = sh.obj({"currency": sh.string(), "location": sh.string(), "suffix": sh.string(),
                         "symbol": sh.string()})
        return sh.add(shape, {
            "timezone": sh.string(), "iana_timezone": sh.string(),
            **{name: sh.string() for name in ("domain", "my_platform_domain", "platform_domain",
                                              "customer_portal_domain", "shop_email", "shop_phone")},
            "test_mode": sh.boolean(), "subscriptions_enabled": sh.integer(),
            "allow_customers_to_skip_delivery": sh.integer(),
            "enabled_presentment_currencies_symbols": sh.array(symbol),
            "disabled_currencies_historical": sh.array(sh.string()), "payment_processor": sh.string()})


CHANGES = (
    NaiveDatetimes(),
    AddressCountryName(),
    Rename(("address",), "order_attributes", "note_attributes"),
    Rename(("address",), "order_note", "cart_note"),
    AddressDiscountId(),
    AddressDeprecatedAliases(),
    CustomerPlatformId(),
    CustomerBillingAddress(),
    CustomerStatusAndCounts(),
    CustomerProcessorTokens(),
    StoreAsShop(),
)
