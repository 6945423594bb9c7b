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
    """Decisions §1.5 and §5.16: `client.name` is the token's name, `client.contact_email` the
    store's email; the top-level `contact_email` is the token's own when set, else the store's.
    Emails are `""`, never null, when there is none (docs/api-choices.md, Stores)."""
    token = call.token
    store_email = call.store.email or ""
    return Reply({"token_information": {
        "name": token.name,
        "contact_email": token.contact_email or store_email,
        "scopes": sorted(token.scopes),
        "client": {"name": token.name, "contact_email": store_email},
    }})


@endpoints.get("/store", scope="read_store", versions=("2021-11",))
def get_store(call: Call) -> Reply:
    return Reply({"store": call.version.serialize("store", call.store)})


@endpoints.get("/shop", scope="read_store", versions=("2021-01",))
def get_shop(call: Call) -> Reply:
    """One object under both keys: it carries the fields of spec 03's shop and store tables
    (the store's adds `checkout_platform`)."""
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
