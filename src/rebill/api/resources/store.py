"""The login probe, token information and the store (decisions §1.5, §1.6)."""

from rebill.domain.geo import country_name, subdivisions

from ..call import Call, Reply
from ..routing import Endpoints

endpoints = Endpoints()


@endpoints.get("/", scope=None)
def root(call: Call) -> Reply:
    return Reply({"message": "ok", "store": call.store.name, "api_version": call.version.name})


@endpoints.get("/token_information", scope=None)
def token_information(call: Call) -> Reply:
    token = call.token
    return Reply({"token_information": {
        "name": token.name,
        "contact_email": token.contact_email,
        "scopes": sorted(token.scopes),
        "client": {"name": token.client_name, "contact_email": token.contact_email},
    }})


@endpoints.get("/store", scope="read_store", versions=("2021-11",))
def get_store(call: Call) -> Reply:
    return Reply({"store": call.version.serialize("store", call.store)})


@endpoints.get("/shop", scope="read_store", versions=("2021-01",))
def get_shop(call: Call) -> Reply:
    data = call.version.serialize("store", call.store)
    return Reply({"shop": data, "store": data})


@endpoints.get("/shop/shipping_countries", scope="read_store", versions=("2021-01",))
def shipping_countries(call: Call) -> Reply:
    countries = []
    for code in call.store.ships_to:
        provinces = sorted({value for value in subdivisions(code).values()}, key=lambda p: p[1])
        countries.append({"code": code, "name": country_name(code),
                          "provinces": [{"code": c, "name": n} for c, n in provinces]})
    return Reply({"shipping_countries": countries})
