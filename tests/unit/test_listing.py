"""Keyset and page-number paging of ``rebill.domain.listing.fetch_page`` on both databases
(decisions §3.1-§3.3): walking forward then back visits every row once, ties on the sort
value are broken by id, and the first/last pages have no previous/next."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from rebill.clock import FrozenClock
from rebill.domain.customer import repository
from rebill.domain.listing import ListQuery, Position
from tests.builders import make_customer
from tests.conftest import make_api

START = datetime(2025, 6, 1, 8, 0, 0, tzinfo=timezone.utc)
# Minutes after START of each customer's created_at/updated_at; several share a second.
OFFSETS = [0, 0, 0, 5, 5, 9, 12]


@pytest.fixture
def seeded(client, database):
    """A store of its own with 7 customers, 3 sharing one updated_at and 2 another."""
    clock = FrozenClock(START)
    api = make_api(client, database, clock)
    made = []
    for minutes in OFFSETS:
        clock.set(START + timedelta(minutes=minutes))
        made.append(make_customer(api))
    return api, made


def _page(api, **kw):
    with api.db.read() as conn:
        return repository.page(conn, api.store.id, ListQuery(**kw))


def _expected(made, sort, descending):
    key = (lambda c: (getattr(c, sort), c.id)) if sort != "id" else (lambda c: c.id)
    return [c.id for c in sorted(made, key=key, reverse=descending)]


def _walk(api, sort, descending, limit=2):
    """Forward from the start to the end, then back to the start; pages as id lists."""
    forward, position = [], None
    while True:
        result = _page(api, sort=sort, descending=descending, limit=limit, position=position)
        if not forward:
            assert result.previous is None, "the first page has no previous"
        forward.append([c.id for c in result.rows])
        assert len(forward) < 20, "paging does not terminate"
        if result.next is None:
            break
        assert result.previous is not None or len(forward) == 1
        position = result.next
    backward, position = [], result.previous
    while position is not None:
        result = _page(api, sort=sort, descending=descending, limit=limit, position=position)
        assert result.next is not None, "a page reached backwards has a next page"
        backward.append([c.id for c in result.rows])
        assert len(backward) < 20, "paging back does not terminate"
        position = result.previous
    return forward, backward


@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
@pytest.mark.parametrize("sort", ["updated_at", "created_at", "id"])
def test_walking_forward_and_back_visits_every_row_once_in_order(seeded, sort, descending):
    api, made = seeded
    expected = _expected(made, sort, descending)
    forward, backward = _walk(api, sort, descending)
    flat = [i for page in forward for i in page]
    assert flat == expected, "no duplicates, no gaps, ties broken by id"
    assert [len(p) for p in forward] == [2, 2, 2, 1]
    assert [i for page in reversed(backward) for i in page] == expected[: len(expected) - len(forward[-1])]
    assert list(reversed(backward)) == forward[:-1]


@pytest.mark.parametrize("descending", [True, False], ids=["desc", "asc"])
def test_ties_on_updated_at_are_ordered_by_id(seeded, descending):
    api, made = seeded
    tied = sorted(c.id for c in made if c.updated_at == START)
    assert len(tied) == 3
    rows = _page(api, sort="updated_at", descending=descending, limit=50).rows
    order = [c.id for c in rows if c.id in tied]
    assert order == (sorted(tied, reverse=descending))


@pytest.mark.parametrize("limit", [1, 3, 7, 50])
def test_page_sizes_partition_the_rows(seeded, limit):
    api, made = seeded
    expected = _expected(made, "updated_at", True)
    forward, _ = _walk(api, "updated_at", True, limit=limit)
    assert [i for page in forward for i in page] == expected
    assert all(len(p) == limit for p in forward[:-1])


def test_single_page_has_neither_next_nor_previous(seeded):
    api, made = seeded
    result = _page(api, sort="updated_at", descending=True, limit=7)
    assert len(result.rows) == 7
    assert result.next is None and result.previous is None


def test_last_page_has_no_next_and_first_page_has_no_previous(seeded):
    api, made = seeded
    first = _page(api, sort="updated_at", descending=True, limit=4)
    assert first.previous is None and first.next is not None
    last = _page(api, sort="updated_at", descending=True, limit=4, position=first.next)
    assert len(last.rows) == 3
    assert last.next is None and last.previous is not None


def test_next_position_is_the_last_row_and_previous_the_first(seeded):
    api, made = seeded
    first = _page(api, sort="updated_at", descending=True, limit=2)
    second = _page(api, sort="updated_at", descending=True, limit=2, position=first.next)
    assert first.next.id == first.rows[-1].id and first.next.backwards is False
    assert second.previous.id == second.rows[0].id and second.previous.backwards is True


def test_position_from_a_tie_does_not_skip_the_other_tied_rows(seeded):
    api, made = seeded
    tied = sorted(c.id for c in made if c.updated_at == START)
    # Resume right after the middle one of the three tied rows, ascending.
    middle = Position(START, tied[1])
    rows = _page(api, sort="updated_at", descending=False, limit=50, position=middle).rows
    assert [c.id for c in rows][0] == tied[2]
    assert tied[0] not in [c.id for c in rows]


def test_positions_hold_native_values_that_survive_a_cursor_round_trip(seeded):
    from rebill.api.listing import decode_cursor, encode_cursor, typed_position

    api, made = seeded
    first = _page(api, sort="updated_at", descending=True, limit=3)
    assert isinstance(first.next.value, datetime)
    key = "customers 2021-11 /customers"
    raw, boundary = decode_cursor(key, encode_cursor(key, {"sort_by": "updated_at-desc"}, first.next))
    assert raw == {"sort_by": "updated_at-desc"}
    assert typed_position("updated_at", boundary) == first.next
    a = _page(api, sort="updated_at", descending=True, limit=3, position=first.next)
    b = _page(api, sort="updated_at", descending=True, limit=3, position=typed_position("updated_at", boundary))
    assert [c.id for c in a.rows] == [c.id for c in b.rows]


def test_page_two_uses_offset_and_has_both_neighbours(seeded):
    api, made = seeded
    expected = _expected(made, "updated_at", True)
    second = _page(api, sort="updated_at", descending=True, limit=2, page=2)
    assert [c.id for c in second.rows] == expected[2:4]
    assert second.previous is not None
    assert second.next is not None


def test_page_numbers_cover_the_rows_and_last_page_has_no_next(seeded):
    api, made = seeded
    expected = _expected(made, "id", True)
    pages = [_page(api, sort="id", descending=True, limit=2, page=n) for n in (1, 2, 3, 4)]
    assert [c.id for p in pages for c in p.rows] == expected
    assert pages[0].previous is None
    assert pages[3].next is None
    assert all(p.next is not None for p in pages[:3])


def test_page_beyond_the_end_is_empty(seeded):
    api, made = seeded
    result = _page(api, sort="id", descending=True, limit=2, page=5)
    assert result.rows == []
    assert result.next is None and result.previous is None


def test_next_position_from_an_offset_page_continues_without_gaps(seeded):
    api, made = seeded
    expected = _expected(made, "updated_at", False)
    second = _page(api, sort="updated_at", descending=False, limit=2, page=2)
    third = _page(api, sort="updated_at", descending=False, limit=2, position=second.next)
    back = _page(api, sort="updated_at", descending=False, limit=2, position=second.previous)
    assert [c.id for c in third.rows] == expected[4:6]
    assert [c.id for c in back.rows] == expected[0:2]
    assert back.previous is None


def test_listing_sees_only_the_store_rows(seeded):
    api, made = seeded
    other = api.other_store()
    make_customer(other)
    rows = _page(api, sort="id", descending=True, limit=50).rows
    assert sorted(c.id for c in rows) == sorted(c.id for c in made)


def test_empty_list_has_no_positions(client, database):
    api = make_api(client, database, FrozenClock(START))
    result = _page(api, sort="updated_at", descending=True, limit=2)
    assert result.rows == [] and result.next is None and result.previous is None
