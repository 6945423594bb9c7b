"""A discount as an address or charge shows it (the discounts resource comes later)."""

from __future__ import annotations

from datetime import datetime
from decimal import Decimal
from typing import Any

import msgspec

from ..money import format_amount


def value_text(discount_type: str, value: Decimal, currency: str) -> str:
    """NOTE: decisions §2.7, a fixed amount carries the currency's minor digits; a percentage
    is shown as stored."""
    return format_amount(value, currency) if discount_type == "fixed_amount" else str(value)


class Discount(msgspec.Struct, kw_only=True):
    id: int
    code: str
    value: str
    value_type: str
    status: str
    starts_at: datetime | None
    ends_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @classmethod
    def from_row(cls, row: Any, currency: str) -> "Discount":
        return cls(id=row.id, code=row.code, value=value_text(row.discount_type, row.value, currency),
                   value_type=row.discount_type, status=row.status, starts_at=row.starts_at,
                   ends_at=row.ends_at, created_at=row.created_at, updated_at=row.updated_at)
