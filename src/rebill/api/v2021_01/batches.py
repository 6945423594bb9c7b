"""How 2021-01 differs from the head for async batches (decisions §2.4, §2.9): naive datetimes
and upper-case statuses, of batches and of their tasks; the lists take either case. Merged by
``contract.py``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from rebill.api import query as q
from rebill.api import shapes as sh
from rebill.api.contract import Change, ListContract
from rebill.api.fields import Schema
from rebill.api.v2021_11 import batches as head
from rebill.domain.batch.model import BATCH_STATUSES, TASK_STATUSES

TIMES = ("closed_at", "created_at", "submitted_at", "updated_at")


class BatchOldShape(Change):
    """Async batches and their tasks show naive UTC datetimes and upper-case statuses
    (`NOT_STARTED`, `PROCESSING`, `COMPLETED`, `FAILED`; tasks `PENDING`, `SUCCESS`...)."""

    kinds = ("async_batch", "async_batch_task")

    def response(self, data: dict[str, Any], obj: Any) -> dict[str, Any]:
        for key in TIMES:
            value = data.get(key)
            if value is not None and value.endswith("+00:00"):
                data[key] = value[:-6]
        data["status"] = data["status"].upper()
        return data

    def response_shape(self, shape: sh.Shape) -> sh.Shape:
        status = shape["properties"]["status"]
        sh.replace(shape, "status", sh.enum(*(value.upper() for value in status["enum"])))
        return sh.naive_datetimes(shape, TIMES)


def _either_case(*allowed: str) -> q.QueryParser:
    parse = q.choice(*allowed)
    return q.typed(type="string", enum=[*allowed, *(a.upper() for a in allowed)])(lambda value: parse(value.lower()))


CHANGES: tuple[Change, ...] = (BatchOldShape(),)
SCHEMAS: dict[str, Schema] = {}
LISTS: dict[str, ListContract] = {
    "async_batches": replace(head.LISTS["async_batches"], filters={
        **head.LISTS["async_batches"].filters, "status": ("status", _either_case(*BATCH_STATUSES))}),
    "async_batch_tasks": replace(head.LISTS["async_batch_tasks"], filters={
        **head.LISTS["async_batch_tasks"].filters, "status": ("status", _either_case(*TASK_STATUSES))}),
}
