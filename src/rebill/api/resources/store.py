"""The login probe, token information and the store (decisions §1.5, §1.6)."""

from rebill.domain.billing import travel
from rebill.domain.geo import country_name, subdivisions
from rebill.domain.store.model import Store
from rebill.domain.unit import zone
from rebill.errors import Forbidden
from rebill.jobs.deliver import drain_now
from rebill.observability import record

from ..call import Call, Reply
from ..declared import Body, listed, one, whole
from ..fields import Field, Schema
from ..routing import Endpoints

endpoints = Endpoints()


@endpoints.get("/", scope=None, reply=whole("root"))
def root(call: Call) -> Reply:
    return Reply({"message": "ok", "store": call.store.name, "api_version": call.version.name})


@endpoints.get("/token_information", scope=None, reply=one("token_information"))
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


@endpoints.get("/store", scope="read_store", versions=("2021-11",), reply=one("store"))
def get_store(call: Call) -> Reply:
    return Reply({"store": call.version.serialize("store", call.store)})


@endpoints.get("/shop", scope="read_store", versions=("2021-01",), reply=one("store", key=("shop", "store")))
def get_shop(call: Call) -> Reply:
    """One object under both keys: it carries the fields of spec 03's shop and store tables
    (the store's adds `checkout_platform`)."""
    data = call.version.serialize("store", call.store)
    return Reply({"shop": data, "store": data})


@endpoints.get("/shop/shipping_countries", scope="read_store", versions=("2021-01",),
               reply=listed("shipping_countries", "shipping_country"))
def shipping_countries(call: Call) -> Reply:
    countries = []
    for code in call.store.ships_to:
        provinces = sorted({value for value in subdivisions(code).values()}, key=lambda p: p[1])
        countries.append({"code": code, "name": country_name(code),
                          "provinces": [{"code": c, "name": n} for c, n in provinces]})
    return Reply({"shipping_countries": countries})


# A Rebill extension (docs/api-choices.md, "Test clock"), the same in every version. A null is
# no value: `{"days": 2, "to": null}` moves two days (a client model with every field optional
# sends it so); nulls alone answer that days (or to, or hours) is required.
CLOCK_ADVANCE = Schema(Field("days", "int"), Field("to", "date"), Field("hours", "int"),
                       one_of=(("days", "to", "hours"),))


def _sandbox(store: Store) -> None:
    """NOTE: decisions §6.11, §6.12: a sandbox store only, 403 before any validation (the
    router asks before it reads the body: found by an audit, a body that was no JSON object
    answered 415 first)."""
    if not store.sandbox:
        raise Forbidden("Only a sandbox store can move its clock")


@endpoints.post("/store/clock/advance", scope="write_orders", calls_out=True, body=Body(CLOCK_ADVANCE),
                reply=one("store_clock"), extension=True, store_check=_sandbox)
def advance_clock(call: Call) -> Reply:
    """NOTE: decisions §6.11, §6.12: one of `days` (at least 1), `to` (a date after the store's
    today, same time of day) or `hours` (at least 1; travel.py refuses two of them and
    out-of-range counts)."""
    body = {k: v for k, v in CLOCK_ADVANCE.parse(call.body).items() if v is not None}
    db, real_now = call.services.db, call.services.clock.now
    # Its stops are billing runs: one job run, counted and logged as a scheduled run is, its line
    # with the run's id and time (found by audits: an advance that paid 1,400 charges left
    # rebill_billing_charges at 0; its log line had no job_id nor duration_ms).
    # A bad request is refused before the run starts: a client's typo is no failed billing run
    # (found by an audit: `days: 0` logged an ERROR and counted a failed run).
    travel.check(db, real_now, call.store.id, days=body.get("days"), to=body.get("to"), hours=body.get("hours"))
    run = record.start_job("billing run")
    ok, refused = False, False
    try:
        now, summary = travel.advance(db, call.services.gateway, real_now, call.store.id,
                                      days=body.get("days"), to=body.get("to"), hours=body.get("hours"),
                                      deliver=lambda store: drain_now(db, real_now, store_id=store.id,
                                                                      private_policy=call.services.webhook_private))
        record.billing_store(call.store.id, summary)
        ok = True
    except travel.ClockMoving:
        refused = True  # another advance holds the clock: nothing ran (found by a review)
        raise
    finally:
        if refused:
            record.refused_job(run)
        else:
            record.finish_job(run, summary.processed if ok else None, ok)
    return call.one("store_clock", {
        "now": now, "today": now.astimezone(zone(call.store.timezone)).date().isoformat(),
        "processed": summary.processed, "paid": summary.paid, "pending": summary.pending, "failed": summary.failed})
