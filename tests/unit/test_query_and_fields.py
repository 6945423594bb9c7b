"""Query-string parsers, body schemas, geography, money and the frozen clock
(decisions §2.2, §2.3, §2.5-§2.7, §4.1-§4.3)."""

from __future__ import annotations

import threading
from datetime import date, datetime, timedelta, timezone
from decimal import Decimal

import pytest

from rebill.api import query
from rebill.api.fields import Field, Schema
from rebill.clock import FrozenClock, SystemClock
from rebill.domain import geo
from rebill.domain.money import format_amount, minor_digits
from rebill.errors import ValidationFailed

UTC = timezone.utc


# ids and booleans ---------------------------------------------------------------------------


@pytest.mark.parametrize("raw,expected", [("1", [1]), ("1,2,3", [1, 2, 3]), (" 4 , 5 ", [4, 5]), ("7,,8,", [7, 8])])
def test_ids_are_comma_separated_integers(raw, expected):
    assert query.ids(raw) == expected


@pytest.mark.parametrize("raw", ["", ",", "a", "1,a", "1.5", "-1", "1;2", "0x10"])
def test_ids_reject_any_non_integer(raw):
    with pytest.raises(ValueError, match="Invalid ids"):
        query.ids(raw)


@pytest.mark.parametrize("raw,expected", [("true", True), ("TRUE", True), ("1", True), (" True ", True),
                                          ("false", False), ("False", False), ("0", False)])
def test_boolean_accepts_true_false_1_0(raw, expected):
    assert query.boolean(raw) is expected


@pytest.mark.parametrize("raw", ["yes", "no", "", "2", "t", "on"])
def test_boolean_rejects_other_values(raw):
    with pytest.raises(ValueError, match="Invalid boolean"):
        query.boolean(raw)


def test_integer_parser():
    assert query.integer(" 42 ") == 42
    assert query.integer("-3") == -3
    with pytest.raises(ValueError):
        query.integer("4x")


def test_choice_parser_lowercases_and_rejects_others():
    parse = query.choice("ACTIVE", "CANCELLED")
    assert parse("ACTIVE") == "active"
    with pytest.raises(ValueError, match="Must be one of ACTIVE, CANCELLED"):
        parse("paused")


def test_window_names_min_and_max_filters():
    assert set(query.window("created_at", "updated_at")) == {
        "created_at_min", "created_at_max", "updated_at_min", "updated_at_max"}


# Datetimes ----------------------------------------------------------------------------------

NOON = datetime(2026, 1, 15, 12, 30, 45, tzinfo=UTC)


@pytest.mark.parametrize("raw", [
    "2026-01-15T12:30:45",
    "2026-01-15 12:30:45",
    "2026-01-15T12:30:45Z",
    "2026-01-15 12:30:45Z",
    "2026-01-15T12:30:45+00:00",
    "2026-01-15T12:30:45+0000",
    "2026-01-15 12:30:45+0000",
    " 2026-01-15T12:30:45 ",
])
def test_parse_datetime_accepts_the_documented_forms_as_utc(raw):
    parsed = query.parse_datetime(raw)
    assert parsed == NOON
    assert parsed.utcoffset() == timedelta(0)


def test_parse_datetime_bare_date_is_midnight_utc():
    parsed = query.parse_datetime("2026-01-15")
    assert parsed == datetime(2026, 1, 15, tzinfo=UTC)
    assert parsed.tzinfo is not None and parsed.utcoffset() == timedelta(0)


@pytest.mark.parametrize("raw", ["2026-01-15T14:30:45+02:00", "2026-01-15T14:30:45+0200",
                                 "2026-01-15T07:30:45-0500"])
def test_parse_datetime_converts_other_offsets_to_utc(raw):
    parsed = query.parse_datetime(raw)
    assert parsed == NOON
    assert parsed.tzinfo == UTC


@pytest.mark.parametrize("raw", ["garbage", "", "yesterday", "2026-13-01", "2026-02-30", "2026-01-15T25:00:00",
                                 "2026/01/15", "15-01-2026", "2026-1-5", "2026-01-15T12:30:45+0", "abcdefghij"])
def test_parse_datetime_rejects_garbage_with_the_exact_message(raw):
    with pytest.raises(ValueError) as info:
        query.parse_datetime(raw)
    assert str(info.value) == f"Invalid date: {raw}. Must be a valid ISO-8601 datetime string"


def test_datetime_filter_error_carries_the_exact_message():
    with pytest.raises(ValueError, match=r"^Invalid date: nope\. Must be a valid ISO-8601 datetime string$"):
        query.datetime_("nope")


# Schema -----------------------------------------------------------------------------------


def _errors(schema: Schema, body: dict, **kw) -> dict:
    with pytest.raises(ValidationFailed) as info:
        schema.parse(body, **kw)
    assert info.value.status == 422
    assert isinstance(info.value.errors, dict)
    return info.value.errors


def test_required_field_missing_is_named():
    schema = Schema(Field("email", "str", required=True), Field("phone", "str"))
    assert _errors(schema, {}) == {"email": ["is required"]}


def test_required_field_may_be_missing_in_partial_updates():
    schema = Schema(Field("email", "str", required=True))
    assert schema.parse({}, partial=True) == {}


def test_required_field_sent_as_null_is_an_error():
    schema = Schema(Field("email", "str", required=True))
    assert _errors(schema, {"email": None}) == {"email": ["is required"]}
    assert "email" in _errors(schema, {"email": None}, partial=True)


def test_every_bad_field_is_named_at_once():
    schema = Schema(Field("a", "str", required=True), Field("b", "int"), Field("c", "bool"))
    assert set(_errors(schema, {"b": "x", "c": "yes"})) == {"a", "b", "c"}


def test_nullable_field_accepts_null():
    schema = Schema(Field("note", "str"))
    assert schema.parse({"note": None}) == {"note": None}


def test_non_nullable_field_rejects_null():
    schema = Schema(Field("note", "str", nullable=False))
    assert "note" in _errors(schema, {"note": None})
    assert "note" in _errors(schema, {"note": None}, partial=True)


def test_unknown_fields_are_ignored():
    schema = Schema(Field("a", "str"))
    assert schema.parse({"a": "x", "zzz": 1}) == {"a": "x"}


@pytest.mark.parametrize("kind,value,expected", [
    ("str", "hello", "hello"),
    ("str", "", ""),
    ("int", 5, 5),
    ("int", "12", 12),
    ("int", "-3", -3),
    ("bool", True, True),
    ("bool", False, False),
    ("decimal", "12.50", Decimal("12.50")),
    ("decimal", 3, Decimal("3")),
    ("date", "2026-01-15", date(2026, 1, 15)),
    # A datetime's date part as written, whatever its offset.
    ("date", "2026-01-15T23:30:00-05:00", date(2026, 1, 15)),
    ("date", "2026-01-15 10:00Z", date(2026, 1, 15)),
    ("object", {"k": 1}, {"k": 1}),
    ("list", [1, 2], [1, 2]),
])
def test_field_kinds_accept_and_coerce(kind, value, expected):
    parsed = Schema(Field("x", kind)).parse({"x": value})["x"]
    assert parsed == expected
    assert type(parsed) is type(expected)


@pytest.mark.parametrize("kind,value,message", [
    ("str", 5, "must be a string"),
    ("str", ["a"], "must be a string"),
    ("int", True, "must be an integer"),
    ("int", 1.5, "must be an integer"),
    ("int", "1.5", "must be an integer"),
    ("int", "abc", "must be an integer"),
    ("bool", "true", "must be a boolean"),
    ("bool", 1, "must be a boolean"),
    ("decimal", "abc", "must be a decimal number as a string"),
    ("decimal", "NaN", "must be a decimal number as a string"),
    ("decimal", "Infinity", "must be a decimal number as a string"),
    ("decimal", True, "must be a decimal number as a string"),
    ("decimal", {"v": 1}, "must be a decimal number as a string"),
    ("date", "15/01/2026", "must be a date (YYYY-MM-DD)"),
    ("date", 20260115, "must be a date (YYYY-MM-DD)"),
    # What fromisoformat also takes (found by an audit: they set charge dates).
    ("date", "2026-W03", "must be a date (YYYY-MM-DD)"),
    ("date", "2026-W03-1", "must be a date (YYYY-MM-DD)"),
    ("date", "20260115", "must be a date (YYYY-MM-DD)"),
    ("date", "2026-01-15x10:00", "must be a date (YYYY-MM-DD)"),
    ("date", "2026-01-15T10", "must be a date (YYYY-MM-DD)"),
    ("date", "2026-01-15T25:00", "must be a date (YYYY-MM-DD)"),
    ("date", "2026-02-30", "must be a date (YYYY-MM-DD)"),
    ("object", [1], "must be an object"),
    ("object", "x", "must be an object"),
    ("list", {"a": 1}, "must be an array"),
    ("list", "a,b", "must be an array"),
])
def test_field_kinds_reject_wrong_types(kind, value, message):
    assert _errors(Schema(Field("x", kind)), {"x": value}) == {"x": [message]}


def test_decimal_from_float_is_exact_text_not_binary():
    assert Schema(Field("x", "decimal")).parse({"x": 0.1})["x"] == Decimal("0.1")


def test_min_length_one_rejects_blank():
    schema = Schema(Field("address1", "str", min_length=1))
    assert _errors(schema, {"address1": ""}) == {"address1": ["cannot be blank"]}
    assert _errors(schema, {"address1": "   "}) == {"address1": ["cannot be blank"]}
    assert schema.parse({"address1": "a"}) == {"address1": "a"}


def test_min_length_above_one_names_the_length():
    schema = Schema(Field("code", "str", min_length=3))
    assert _errors(schema, {"code": "ab"}) == {"code": ["must be at least 3 characters"]}
    assert schema.parse({"code": "abc"}) == {"code": "abc"}


def test_choices_restrict_values():
    schema = Schema(Field("unit", "str", choices=frozenset({"day", "week", "month"})))
    assert _errors(schema, {"unit": "year"}) == {"unit": ["must be one of: day, month, week"]}
    assert schema.parse({"unit": "week"}) == {"unit": "week"}


def test_convert_and_check_report_their_messages():
    def upper(value):
        if value == "bad":
            raise ValueError("is not convertible")
        return value.upper()

    schema = Schema(Field("a", "str", convert=upper),
                    Field("b", "int", check=lambda v: "must be positive" if v <= 0 else None))
    assert schema.parse({"a": "x", "b": 2}) == {"a": "X", "b": 2}
    assert _errors(schema, {"a": "bad", "b": 0}) == {"a": ["is not convertible"], "b": ["must be positive"]}


def test_bounds_of_lists_and_integers_are_checked_before_the_items():
    schema = Schema(Field("lines", "list", items=ATTRIBUTES, min_items=1, max_items=2),
                    Field("month", "int", minimum=1, maximum=12), Field("few", "list", items="int", min_items=2),
                    Field("low", "int", minimum=0), Field("high", "int", maximum=5))
    assert _errors(schema, {"lines": [], "month": 0, "few": [1], "low": -1, "high": 6}) == {
        "lines": ["cannot be empty"], "month": ["must be from 1 to 12"], "few": ["must have at least 2 items"],
        "low": ["must be at least 0"], "high": ["must be at most 5"]}
    # A list too long is refused whole: its items (all bad here) are not read through.
    assert _errors(schema, {"lines": ["x", "y", "z"], "month": "13"}) == {
        "lines": ["has too many items (at most 2)"], "month": ["must be from 1 to 12"]}
    assert schema.parse({"lines": [{"name": "a", "value": "b"}], "month": "12", "low": 0, "high": 5}) == {
        "lines": [{"name": "a", "value": "b"}], "month": 12, "low": 0, "high": 5}


def test_key_maps_body_name_to_head_name():
    schema = Schema(Field("cart_attributes", "list", key="order_attributes"))
    assert schema.parse({"cart_attributes": []}) == {"order_attributes": []}


BILLING = Schema(Field("zip", "str", required=True), Field("city", "str", min_length=1))


def test_nested_object_errors_nest_under_the_field():
    schema = Schema(Field("billing_address", "object", items=BILLING))
    assert _errors(schema, {"billing_address": {"city": ""}}) == {
        "billing_address": {"zip": ["is required"], "city": ["cannot be blank"]}}


def test_nested_object_is_cleaned_by_its_schema():
    schema = Schema(Field("billing_address", "object", items=BILLING))
    assert schema.parse({"billing_address": {"zip": "94105", "extra": 1}}) == {"billing_address": {"zip": "94105"}}


ATTRIBUTES = Schema(Field("name", "str", required=True), Field("value", "str", required=True))


def test_list_item_errors_are_keyed_by_index():
    schema = Schema(Field("order_attributes", "list", items=ATTRIBUTES))
    body = {"order_attributes": [{"name": "a", "value": "b"}, {"name": "a"}, "x", {"name": 1, "value": "v"}]}
    assert _errors(schema, body) == {"order_attributes": {
        "1": {"value": ["is required"]},
        "2": ["must be an object"],
        "3": {"name": ["must be a string"]},
    }}


def test_list_of_scalars_checks_each_item():
    schema = Schema(Field("ids", "list", items="int"))
    assert schema.parse({"ids": [1, "2"]}) == {"ids": [1, 2]}
    assert _errors(schema, {"ids": [1, "x", True]}) == {"ids": {"1": ["must be an integer"],
                                                                "2": ["must be an integer"]}}


def test_renamed_keeps_the_head_key_and_reports_the_new_name():
    head = Schema(Field("country_code", "str", required=True), Field("city", "str"))
    old = head.renamed(country_code="country")
    assert old.parse({"country": "US", "city": "X"}) == {"country_code": "US", "city": "X"}
    assert "country" in old and "country_code" not in old
    assert _errors(old, {"country_code": "US"}) == {"country": ["is required"]}
    assert _errors(old, {"country": 5}) == {"country": ["must be a string"]}
    # The head schema is untouched.
    assert head.parse({"country_code": "US"}) == {"country_code": "US"}


def test_renamed_twice_still_targets_the_head_key():
    schema = Schema(Field("a", "str")).renamed(a="b").renamed(b="c")
    assert schema.parse({"c": "x"}) == {"a": "x"}


def test_one_of_requires_at_least_one_of_the_group():
    schema = Schema(Field("country", "str"), Field("country_code", "str"), one_of=(("country", "country_code"),))
    assert _errors(schema, {}) == {"country": ["is required"]}
    assert _errors(schema, {"country": None, "country_code": None}) == {"country": ["is required"]}
    assert schema.parse({"country_code": "US"}) == {"country_code": "US"}
    assert schema.parse({"country": "Canada"}) == {"country": "Canada"}
    assert schema.parse({}, partial=True) == {}


def test_one_of_does_not_double_report_a_field_already_in_error():
    schema = Schema(Field("a", "str"), Field("b", "str"), one_of=(("a", "b"),))
    assert _errors(schema, {"a": 5}) == {"a": ["must be a string"]}


def test_without_plus_and_changed_derive_schemas():
    base = Schema(Field("a", "str", required=True), Field("b", "str"))
    assert "a" not in base.without("a")
    assert base.without("a").parse({}) == {}
    assert base.plus(Field("c", "int", required=True)).parse({"a": "x", "c": 1}) == {"a": "x", "c": 1}
    assert base.changed("a", required=False).parse({}) == {}
    assert _errors(base, {}) == {"a": ["is required"]}


# Geography ---------------------------------------------------------------------------------


@pytest.mark.parametrize("country,given,expected", [
    ("US", "CA", ("CA", "California")),
    ("US", "US-CA", ("CA", "California")),
    ("US", "ca", ("CA", "California")),
    ("US", "California", ("CA", "California")),
    ("US", "  california ", ("CA", "California")),
    ("US", "NEW YORK", ("NY", "New York")),
    ("CA", "QC", ("QC", "Quebec")),
    ("CA", "Québec", ("QC", "Quebec")),
    ("MX", "Nuevo León", ("NLE", "Nuevo León")),
    ("MX", "nuevo leon", ("NLE", "Nuevo León")),
    ("MX", "NUEVO LEÓN", ("NLE", "Nuevo León")),
])
def test_provinces_by_code_or_name_case_and_accent_insensitive(country, given, expected):
    assert geo.find_province(country, given) == expected


@pytest.mark.parametrize("country,given", [("US", "ZZ"), ("US", "Ontario"), ("CA", "California"), ("US", "")])
def test_unknown_province_is_none(country, given):
    assert geo.find_province(country, given) is None


DECISIONS_NO_ZIP = set("""AE AG AN AO AW BF BI BJ BO BS BW BZ CD CF CG CI CK CM DJ DM ER FJ GA GD GH GM GN GQ
GY HK JM KE KI KM KN KP LC ML MO MR MS MU MW NA NR NU QA RW SB SC SL SO SR ST SY TF TK TL TO TT TV TZ UG
VU YE ZW""".split())


def test_countries_not_requiring_zip_are_those_of_decisions():
    assert geo.COUNTRIES_NOT_REQUIRING_ZIP == DECISIONS_NO_ZIP


def test_countries_requiring_province_are_those_of_decisions():
    assert geo.COUNTRIES_REQUIRING_PROVINCE == set("US CA AU BR MX IN IT ES JP CN AR MY ID IE AE".split())


@pytest.mark.parametrize("country", ["AE", "HK", "QA", "ZW"])
def test_zip_may_be_missing_where_there_are_no_postal_codes(country):
    assert geo.zip_problem(country, None) is None
    assert geo.zip_problem(country, "") is None


@pytest.mark.parametrize("country", ["US", "GB", "CA", "DE", "FR", "JP"])
def test_zip_is_required_elsewhere(country):
    assert geo.zip_problem(country, "") is not None
    assert geo.zip_problem(country, "   ") is not None
    assert geo.zip_problem(country, None) is not None


@pytest.mark.parametrize("zip_code", ["94105", "94105-1234", "00501"])
def test_valid_us_zips(zip_code):
    assert geo.UNITED_STATES_ZIP_REGEX.match(zip_code)
    assert geo.zip_problem("US", zip_code) is None


@pytest.mark.parametrize("zip_code", ["9410", "941055", "94105-12", "94105 1234", "ABCDE", "94105-", "SW1A 1AA"])
def test_invalid_us_zips(zip_code):
    assert not geo.UNITED_STATES_ZIP_REGEX.match(zip_code)
    assert geo.zip_problem("US", zip_code) == "is not a valid United States zip code"


@pytest.mark.parametrize("zip_code", ["SW1A 1AA", "sw1a 1aa", "SW1A1AA", "EC1A 1BB", "W1A 0AX", "M1 1AE",
                                      "B33 8TH", "CR2 6XH", "DN55 1PT", "GIR 0AA", "gir0aa"])
def test_valid_uk_postcodes(zip_code):
    assert geo.UNITED_KINGDOM_ZIP_REGEX.match(zip_code)
    assert geo.zip_problem("GB", zip_code) is None


@pytest.mark.parametrize("zip_code", ["12345", "SW1A", "1AA SW1", "SW1A 1AAA", "QA1 1AA", "SW1A-1AA", "XX"])
def test_invalid_uk_postcodes(zip_code):
    assert not geo.UNITED_KINGDOM_ZIP_REGEX.match(zip_code)
    assert geo.zip_problem("GB", zip_code) == "is not a valid United Kingdom postcode"


def test_other_countries_have_no_zip_pattern():
    assert geo.zip_problem("DE", "10115") is None
    assert geo.zip_problem("CA", "H2X 1Y4") is None


@pytest.mark.parametrize("name,code", [
    ("United States", "US"),
    ("united states of america", "US"),
    ("United Kingdom", "GB"),
    ("Germany", "DE"),
    ("GERMANY", "DE"),
    ("Côte d'Ivoire", "CI"),
    ("cote d'ivoire", "CI"),
    ("us", "US"),
    ("CA", "CA"),
])
def test_country_code_for_name(name, code):
    assert geo.country_code_for_name(name) == code


@pytest.mark.parametrize("name", ["Narnia", "", "ZZ", "United"])
def test_country_code_for_unknown_name_is_none(name):
    assert geo.country_code_for_name(name) is None


def test_country_name_and_lookup():
    assert geo.country_name("US") == "United States"
    assert geo.country_name("ZZ") is None
    assert geo.country("de").alpha_2 == "DE"
    assert geo.country("DEU") is None


# Money ------------------------------------------------------------------------------------


@pytest.mark.parametrize("amount,currency,expected", [
    ("12.5", "USD", "12.50"),
    ("12", "USD", "12.00"),
    ("0.1", "USD", "0.10"),
    ("1.005", "USD", "1.01"),
    ("1200", "JPY", "1200"),
    ("12.5", "JPY", "13"),
    ("1199.4", "JPY", "1199"),
    ("1.2", "KWD", "1.200"),
    ("1.2345", "KWD", "1.235"),
    ("12.5", "usd", "12.50"),
    ("12.5", "EUR", "12.50"),
    ("0", "USD", "0.00"),
    # ISO 4217's four-digit units of account (found by an audit: taken as two-digit).
    ("1.23456", "CLF", "1.2346"), ("0.12", "UYW", "0.1200"),
])
def test_format_amount_uses_the_currency_minor_digits(amount, currency, expected):
    assert format_amount(Decimal(amount), currency) == expected


def test_format_amount_is_exact_not_float():
    total = Decimal("0.1") + Decimal("0.2")
    assert format_amount(total, "USD") == "0.30"
    big = Decimal("123456789012345678.91")
    assert format_amount(big, "USD") == "123456789012345678.91"
    assert format_amount(Decimal("2.675"), "USD") == "2.68"  # float(2.675) rounds to 2.67
    assert isinstance(format_amount(Decimal("1"), "USD"), str)


def test_minor_digits():
    assert (minor_digits("USD"), minor_digits("JPY"), minor_digits("KWD"), minor_digits("krw")) == (2, 0, 3, 0)
    assert (minor_digits("CLF"), minor_digits("uyw")) == (4, 4)


# Clock -----------------------------------------------------------------------------------


def test_frozen_clock_starts_at_a_fixed_aware_utc_second():
    clock = FrozenClock()
    now = clock.now()
    assert now.tzinfo is not None and now.utcoffset() == timedelta(0)
    assert now.microsecond == 0
    assert clock.now() == now


def test_frozen_clock_drops_fractions_from_its_start():
    clock = FrozenClock(datetime(2030, 5, 1, 8, 0, 0, 999999, tzinfo=UTC))
    assert clock.now() == datetime(2030, 5, 1, 8, 0, 0, tzinfo=UTC)


def test_frozen_clock_moves_only_when_told():
    clock = FrozenClock(datetime(2030, 5, 1, tzinfo=UTC))
    assert clock.advance(days=1, hours=2) == datetime(2030, 5, 2, 2, 0, tzinfo=UTC)
    assert clock.advance(timedelta(minutes=30)) == datetime(2030, 5, 2, 2, 30, tzinfo=UTC)
    assert clock.now() == datetime(2030, 5, 2, 2, 30, tzinfo=UTC)


def test_frozen_clock_set_treats_naive_as_utc_and_converts_offsets():
    clock = FrozenClock()
    clock.set(datetime(2031, 1, 1, 9, 0, 0, 123))
    assert clock.now() == datetime(2031, 1, 1, 9, 0, tzinfo=UTC)
    assert clock.now().microsecond == 0
    clock.set(datetime(2031, 1, 1, 9, 0, tzinfo=timezone(timedelta(hours=2))))
    assert clock.now() == datetime(2031, 1, 1, 7, 0, tzinfo=UTC)
    assert clock.now().tzinfo == UTC


def test_frozen_clock_is_safe_across_threads():
    clock = FrozenClock(datetime(2030, 1, 1, tzinfo=UTC))

    def bump():
        for _ in range(500):
            clock.advance(seconds=1)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert clock.now() == datetime(2030, 1, 1, tzinfo=UTC) + timedelta(seconds=2000)


def test_system_clock_is_aware_utc_whole_seconds():
    now = SystemClock().now()
    assert now.utcoffset() == timedelta(0)
    assert now.microsecond == 0
