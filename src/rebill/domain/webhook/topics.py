"""Which topics a webhook may subscribe to, and which related objects it may ask for, per API
version (spec 01 Events for 2021-11, spec 02 Events for 2021-01).

Every event the service records has a topic; only these can be subscribed to. The others
(`onetime/*`, `discount/*`, `metafield/*`, `plan/*`, `webhook/disabled`...) are in the event
log (`GET /events`) only."""

from __future__ import annotations

from types import MappingProxyType

# resource -> (topics, allowed included_objects)
_V2021_11 = {
    "address": (("created", "updated"), ("customer", "payment_methods")),
    "charge": (("created", "failed", "max_retries_reached", "paid", "refunded", "uncaptured", "upcoming", "updated",
                "deleted"), ("customer", "metafields", "payment_methods")),
    "customer": (("activated", "created", "deactivated", "payment_method_updated", "updated", "deleted"),
                 ("addresses", "metafields", "payment_methods")),
    "order": (("cancelled", "created", "deleted", "processed", "payment_captured", "upcoming", "updated", "success"),
              ("customer", "metafields")),
    "subscription": (("activated", "cancelled", "created", "deleted", "skipped", "updated", "unskipped", "paused"),
                     ("customer", "metafields")),
}
_V2021_01 = {
    "address": (("created", "updated"), ("customer", "metafields")),
    "charge": (("created", "failed", "max_retries_reached", "paid", "refunded", "uncaptured", "upcoming", "updated"),
               ("metafields",)),
    "customer": (("activated", "created", "deactivated", "payment_method_updated", "updated"),
                 ("addresses", "metafields")),
    "order": (("cancelled", "created", "deleted", "processed", "upcoming", "updated"), ("customer", "metafields")),
    "product": (("created", "deleted", "updated"), ("collections", "metafields")),
    "subscription": (("activated", "cancelled", "created", "deleted", "skipped", "updated", "unskipped", "paused"),
                     ("metafields",)),
}


def _table(resources: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]) -> MappingProxyType[str, tuple[str, ...]]:
    return MappingProxyType({f"{resource}/{verb}": includes
                             for resource, (verbs, includes) in resources.items() for verb in verbs})


# version -> topic -> the included_objects that topic's resource allows
TOPICS: dict[str, MappingProxyType[str, tuple[str, ...]]] = {
    "2021-11": _table(_V2021_11),
    "2021-01": _table(_V2021_01),
}


def resource_of(topic: str) -> str:
    return topic.split("/", 1)[0]


def is_deleted(topic: str) -> bool:
    """NOTE: decisions §8.2, a `*/deleted` payload carries the id alone."""
    return topic.endswith("/deleted")
