"""The one rule for a valid order, for every consumer of `orders`: both Flink jobs apply all of it (through
orders_codec, at processing time), the Spark job counts the rows of the Iceberg table that break its clock-free part.

An order is valid when order_id and supplier are non-empty, the price is a finite decimal that fits the Iceberg
column (DECIMAL(10,2), not negative), and bid_time lies inside a window of plausibility around processing time
(at most ``max_future_s`` ahead, ``max_past_s`` behind). An order outside that window would move (or never reach)
the event-time clock of supplier-stats, so it is dead-lettered with its reason instead.

Standard library only: the file is shipped to the Flink cluster next to the jobs.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from decimal import Decimal

#: the Iceberg column's type, DECIMAL(10,2)
PRICE_PRECISION, PRICE_SCALE = 10, 2
MAX_PRICE = Decimal(10 ** (PRICE_PRECISION - PRICE_SCALE)) - Decimal(1).scaleb(-PRICE_SCALE)
CENT = Decimal(1).scaleb(-PRICE_SCALE)
DEFAULT_MAX_FUTURE_S = 3600
DEFAULT_MAX_PAST_S = 7 * 24 * 3600  # the retention of `orders`: an older order cannot be a replay of the topic


@dataclass(frozen=True)
class OrderRule:
    max_future_s: int = DEFAULT_MAX_FUTURE_S
    max_past_s: int = DEFAULT_MAX_PAST_S

    def __post_init__(self) -> None:
        if self.max_future_s < 0 or self.max_past_s < 0:
            raise ValueError(
                f"the plausibility window must not be negative (max_future_s={self.max_future_s}, "
                f"max_past_s={self.max_past_s})"
            )

    def reason(
        self, order_id: str, supplier: str, price: Decimal, bid_time: dt.datetime, now: dt.datetime
    ) -> str | None:
        """Why the order is not valid, or None. ``bid_time`` and ``now`` are naive UTC."""
        if not order_id.strip():
            return "order_id is empty"
        if not supplier.strip():
            return "supplier is empty"
        if not price.is_finite():
            return f"price {price} is not a finite number"
        if price < 0:
            return f"price {price} is negative"
        if abs(price) > MAX_PRICE or price != price.quantize(CENT, rounding="ROUND_DOWN"):
            return f"price {price} does not fit DECIMAL({PRICE_PRECISION},{PRICE_SCALE})"
        if bid_time > now + dt.timedelta(seconds=self.max_future_s):
            return (
                f"bid_time {bid_time:%Y-%m-%dT%H:%M:%S}Z is more than {self.max_future_s} s after processing time "
                "(LINEAGE_LAB_ORDER_MAX_FUTURE_S)"
            )
        if bid_time < now - dt.timedelta(seconds=self.max_past_s):
            return (
                f"bid_time {bid_time:%Y-%m-%dT%H:%M:%S}Z is more than {self.max_past_s} s before processing time "
                "(LINEAGE_LAB_ORDER_MAX_PAST_S)"
            )
        return None


def spark_valid(functions):
    """The clock-free part of the rule as a Spark column (pass ``pyspark.sql.functions``): true for a valid row of
    the Iceberg orders table, never null. The table's type already holds the price's precision."""
    F = functions
    present = (
        (F.length(F.trim(F.col("order_id"))) > 0)
        & (F.length(F.trim(F.col("supplier"))) > 0)
        & F.col("price").isNotNull()
        & (F.col("price") >= 0)
        & F.col("bid_time").isNotNull()
    )
    return F.coalesce(present, F.lit(False))
