"""What a supplier_stats commit of one day says it read and wrote: the ``lineage-lab.*`` snapshot properties the
Spark job writes into the commit itself, so that the next run (where to read on from) and the conservation hop
(what each run read) take them from the table, atomic with the rows, never from Dagster's memory."""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

#: prefix of the snapshot properties of a day's commit (conservation/spark_days.py and increment.py read them back)
PROPERTY_PREFIX = "lineage-lab."
#: snapshot id of orders when the table had no snapshot yet (nothing to read)
NO_SNAPSHOT = "none"


@dataclass(frozen=True)
class RunRead:
    """What one run read: its mode and why, the orders snapshot it read after (exclusive; None in a full run), the
    supplier_stats snapshot whose rows it added to (None in a full run), and the day's orders it read and refused."""

    mode: str
    reason: str
    start: int | None
    base: int | None
    rows: int
    rejected: int


def commit_properties(
    day: str,
    input_snapshot: int | None,
    input_rows: int,
    rejected: int,
    output_rows: int,
    output_orders: int,
    read: RunRead | None = None,
    rejected_cents: int | None = None,
) -> dict[str, str]:
    """The properties of a day's commit. The day-level figures are cumulative whatever the mode: the orders snapshot
    the day's rows now cover, the day's orders up to it, the refused ones, the supplier_stats rows of the day and
    the orders they sum (``input_rows - rejected``); ``read`` adds what this run itself read."""
    values = {
        "day": day,
        "input-snapshot-id": NO_SNAPSHOT if input_snapshot is None else str(input_snapshot),
        "input-rows": str(input_rows),
        "rejected-orders": str(rejected),
        "output-rows": str(output_rows),
        "output-orders": str(output_orders),
    }
    if rejected_cents is not None:  # unknown when an increment's base did not record it: left out, not guessed
        values["rejected-price"] = price_text(rejected_cents)
    if read is not None:
        values |= {
            "mode": read.mode,
            "mode-reason": read.reason,
            "start-snapshot-id": NO_SNAPSHOT if read.start is None else str(read.start),
            "base-snapshot-id": NO_SNAPSHOT if read.base is None else str(read.base),
            "read-rows": str(read.rows),
            "read-rejected": str(read.rejected),
        }
    return {PROPERTY_PREFIX + k: v for k, v in values.items()}


def price_text(cents: int) -> str:
    """Cents as the decimal of two places the property holds (``-1234`` -> ``"-12.34"``)."""
    return str(Decimal(cents).scaleb(-2))


def cents_of(text: str | None) -> int | None:
    """A price property in cents: None for a missing or malformed value (a commit that does not say)."""
    try:
        cents = Decimal(text).scaleb(2) if text else None
    except InvalidOperation:
        return None
    return int(cents) if cents is not None and cents.is_finite() and cents == cents.to_integral_value() else None


def optional_id(text: str | None) -> int | None:
    """A snapshot id property: None for ``none``, a missing or a malformed value (a commit that does not say)."""
    return int(text) if text and text.lstrip("-").isdigit() else None
