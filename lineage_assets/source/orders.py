"""Mock orders like the reference lab's, inserted into the PostgreSQL table Debezium captures."""

from __future__ import annotations

import dataclasses
import datetime as dt
import random
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import psycopg

SUPPLIERS = ("Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack")
PRODUCTS = (
    "Intelligent Cotton Shirt",
    "Ergonomic Steel Chair",
    "Sleek Wooden Table",
    "Rustic Granite Lamp",
    "Durable Leather Bag",
    "Gorgeous Copper Watch",
    "Heavy Duty Rubber Boots",
    "Practical Plastic Bottle",
    "Mediocre Silk Scarf",
    "Awesome Marble Clock",
    "Fantastic Bronze Knife",
    "Lightweight Linen Jacket",
)

# column order = the reference record's field order (Debezium keeps it in the Avro schema)
TABLE_DDL = """
CREATE TABLE IF NOT EXISTS public.orders (
    supplier text NOT NULL,
    item text NOT NULL,
    price text NOT NULL,
    bid_time timestamp NOT NULL,
    order_id text PRIMARY KEY
);
COMMENT ON COLUMN public.orders.bid_time IS 'UTC; timestamp without time zone so Debezium emits timestamp-millis';
COMMENT ON COLUMN public.orders.price IS 'decimal text with 2 places, as in the reference lab';
"""


@dataclass(frozen=True)
class Order:
    order_id: str
    supplier: str
    item: str
    price: str
    bid_time: dt.datetime  # UTC, naive (the column is timestamp without time zone)
    currency: str | None = None  # only once the source team added the column (a compatible change)


def make_orders(
    count: int, rng: random.Random | None = None, now: Callable[[], dt.datetime] | None = None
) -> Iterator[Order]:
    """``count`` orders: one of the 8 suppliers, a product, a price in 1..150 with 2 decimals, bid_time = now."""
    rng = rng or random.Random()
    clock = now or (lambda: dt.datetime.now(dt.UTC).replace(tzinfo=None))
    for _ in range(count):
        yield Order(
            order_id=str(uuid.UUID(int=rng.getrandbits(128), version=4)),
            supplier=rng.choice(SUPPLIERS),
            item=rng.choice(PRODUCTS),
            price=f"{rng.randint(100, 15000) / 100:.2f}",
            bid_time=clock(),
        )


def ensure_table(conn: psycopg.Connection) -> None:
    conn.execute(TABLE_DDL)


def insert_orders(
    conn: psycopg.Connection,
    count: int,
    rate_per_second: float,
    rng: random.Random | None = None,
    sleep: Callable[[float], None] = time.sleep,
    currency: str | None = None,
) -> list[Order]:
    """Insert ``count`` orders at about ``rate_per_second`` (0 = as fast as possible), one commit per second's
    worth, so Debezium sees a steady stream. ``currency`` fills the column of that name, which the table has only
    once it was added. Returns what was inserted."""
    if count < 0 or rate_per_second < 0:
        raise ValueError(f"count and rate must not be negative (got count={count}, rate={rate_per_second})")
    columns = ["order_id", "supplier", "item", "price", "bid_time"]
    if currency is not None:
        has = conn.execute(
            "SELECT 1 FROM information_schema.columns WHERE table_schema = 'public' AND table_name = 'orders' "
            "AND column_name = 'currency'"
        ).fetchone()
        if not has:
            raise ValueError(
                "public.orders has no column currency: add it first (ALTER TABLE public.orders ADD COLUMN currency "
                "text), or generate orders without a currency"
            )
        columns.append("currency")
    insert = f"INSERT INTO public.orders ({', '.join(columns)}) VALUES ({', '.join(['%s'] * len(columns))})"
    batch = max(1, int(rate_per_second)) if rate_per_second else 500
    inserted: list[Order] = []
    pending = count
    while pending:
        started = time.monotonic()
        # bid_time = the moment of insertion
        chunk = [dataclasses.replace(o, currency=currency) for o in make_orders(min(batch, pending), rng)]
        pending -= len(chunk)
        with conn.transaction(), conn.cursor() as cur:
            cur.executemany(insert, [dataclasses.astuple(o)[: len(columns)] for o in chunk])
        inserted.extend(chunk)
        if rate_per_second and pending:
            sleep(max(0.0, len(chunk) / rate_per_second - (time.monotonic() - started)))
    return inserted
