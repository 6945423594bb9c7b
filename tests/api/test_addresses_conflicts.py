"""Overlapping writes to an address: the loser gets 409 and nothing is half written
(spec 01 Errors 409, decisions §4.6). Tested through the optimistic lock the domain keeps."""

from __future__ import annotations

import pytest

from rebill.domain.address import repository, service
from rebill.domain.address.model import AddressUpdate
from rebill.domain.address.verifier import OfflineZipVerifier
from rebill.domain.unit import Unit
from rebill.errors import Conflict
from tests.api.test_addresses_support import V01, V11, address_events
from tests.builders import make_address


def _read(api, address_id):
    with api.db.read() as conn:
        return repository.get(conn, api.store.id, address_id)


def test_repository_update_with_a_stale_lock_version_writes_nothing_and_answers_false(vapi):
    address = make_address(vapi)
    stale = _read(vapi, address.id)
    assert vapi.put(f"/addresses/{address.id}", json={"city": "Oakland", "zip": "94607"}).status_code == 200
    with vapi.db.write() as conn:
        assert repository.update_address(conn, vapi.store.id, address.id, stale.lock_version,
                                         {"city": "Stale City"}) is False
    assert vapi.get(f"/addresses/{address.id}").json()["address"]["city"] == "Oakland"


def test_repository_update_with_the_current_lock_version_writes_and_bumps_it(api):
    address = make_address(api)
    current = _read(api, address.id)
    with api.db.write() as conn:
        assert repository.update_address(conn, api.store.id, address.id, current.lock_version,
                                         {"city": "Fresh City"}) is True
    after = _read(api, address.id)
    assert after.city == "Fresh City"
    assert after.lock_version == current.lock_version + 1


def test_every_api_update_moves_the_lock_version(api):
    address = make_address(api)
    before = _read(api, address.id).lock_version
    api.put(f"/addresses/{address.id}", json={"address1": "1 A St"})
    api.put(f"/addresses/{address.id}", json={"address1": "2 B St"})
    assert _read(api, address.id).lock_version == before + 2


def test_repository_delete_with_a_stale_lock_version_deletes_nothing(api):
    address = make_address(api)
    stale = _read(api, address.id)
    api.put(f"/addresses/{address.id}", json={"address1": "1 Other St"})
    with api.db.write() as conn:
        assert repository.delete_address(conn, api.store.id, address.id, stale.lock_version) is False
    assert api.get(f"/addresses/{address.id}").status_code == 200


@pytest.fixture
def stale_reads(monkeypatch):
    """Makes repository.get hand out the copy of an address taken before a concurrent write."""
    stale: dict[int, object] = {}
    real_get = repository.get

    def get(conn, store_id, address_id):
        return stale.get(address_id) or real_get(conn, store_id, address_id)

    monkeypatch.setattr(repository, "get", get)
    return stale


def test_service_update_raises_conflict_when_the_row_changed_between_read_and_write(api, stale_reads):
    address = make_address(api)
    snapshot = _read(api, address.id)
    assert api.put(f"/addresses/{address.id}", json={"address1": "1 Winner St"}).status_code == 200
    stale_reads[address.id] = snapshot
    with pytest.raises(Conflict):
        with api.db.write() as conn:
            service.update(Unit(conn, api.store, api.clock.now()), OfflineZipVerifier(), address.id,
                           AddressUpdate(address1="2 Loser St"))
    stale_reads.clear()
    after = _read(api, address.id)
    assert (after.address1, after.lock_version) == ("1 Winner St", snapshot.lock_version + 1)


def test_service_update_from_a_fresh_read_succeeds(api):
    address = make_address(api)
    api.put(f"/addresses/{address.id}", json={"address1": "1 Winner St"})
    with api.db.write() as conn:
        updated = service.update(Unit(conn, api.store, api.clock.now()), OfflineZipVerifier(), address.id,
                                 AddressUpdate(address1="2 Next St"))
    assert updated.address1 == "2 Next St"


@pytest.mark.parametrize("version", [V01, V11])
def test_losing_api_update_answers_409_and_writes_nothing_and_records_no_event(api, stale_reads, version):
    address = make_address(api)
    snapshot = _read(api, address.id)
    assert api.put(f"/addresses/{address.id}", json={"address1": "1 Winner St"}).status_code == 200
    stale_reads[address.id] = snapshot
    response = api.put(f"/addresses/{address.id}", json={"address1": "2 Loser St", "first_name": "Lost"},
                       version=version)
    assert response.status_code == 409
    assert isinstance(response.json()["errors"], str)
    stale_reads.clear()
    body = api.get(f"/addresses/{address.id}").json()["address"]
    assert (body["address1"], body["first_name"]) == ("1 Winner St", "Ada")
    assert address_events(api, address.id) == [("address/created", address.id), ("address/updated", address.id)]


def test_losing_api_delete_answers_409_and_the_address_stays(api, stale_reads):
    address = make_address(api)
    snapshot = _read(api, address.id)
    assert api.put(f"/addresses/{address.id}", json={"address1": "1 Winner St"}).status_code == 200
    stale_reads[address.id] = snapshot
    response = api.delete(f"/addresses/{address.id}")
    assert response.status_code == 409
    stale_reads.clear()
    assert api.get(f"/addresses/{address.id}").status_code == 200
    assert ("address/deleted", address.id) not in address_events(api, address.id)
