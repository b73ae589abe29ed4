"""Days of supplier_stats under test: known orders written to Iceberg `default.orders` with pyiceberg, the day's
rows an aggregation computed here must equal, the rows Spark wrote (read with pyiceberg), and one materialization
of a day through Dagster in this process."""

from __future__ import annotations

import datetime as dt
import random
from collections import defaultdict
from decimal import Decimal

import dagster as dg
import pyarrow as pa

from infra.services.iceberg_catalog import load_catalog
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources
from lineage_assets.spark.supplier_stats_batch import build_supplier_stats_asset
from tests.service.lineage_assets.conftest import ORDERS_ARROW, commit_retrying


def write_orders(table, rows) -> None:
    commit_retrying(table, lambda t: t.append(pa.Table.from_pylist(rows, schema=ORDERS_ARROW)))


def known_orders(days, n=300, seed=11):
    rng = random.Random(seed)
    rows = []
    for i in range(n):
        day = days[i % 2]
        rows.append(
            {
                "order_id": f"o-{seed}-{i}",
                "item": "Lamp",
                "price": Decimal(rng.randint(100, 15000)) / 100,
                "supplier": rng.choice(["Alice", "Bob", "Carol", "Alex", "Joe", "James", "Jane", "Jack"]),
                "bid_time": dt.datetime.combine(day, dt.time()) + dt.timedelta(seconds=rng.randrange(86400)),
            }
        )
    return rows


def expected_stats(rows, day):
    totals = defaultdict(lambda: [Decimal("0"), 0])
    for r in rows:
        if r["bid_time"].date() != day or r["price"] is None or r["price"] < 0 or not r["supplier"].strip():
            continue
        key = (r["supplier"], day, r["bid_time"].hour)
        totals[key][0] += r["price"]
        totals[key][1] += 1
    return {k: (v[0].quantize(Decimal("0.01")), v[1]) for k, v in totals.items()}


def actual_stats(settings, day):
    table = load_catalog(settings).load_table("default.supplier_stats")
    rows = table.scan(row_filter=f"bid_date = '{day.isoformat()}'").to_arrow().to_pylist()
    return {(r["supplier"], r["bid_date"], r["bid_hour"]): (r["total_price"], r["total_count"]) for r in rows}


def materialize(settings, day, lineage, config=None):
    asset = build_supplier_stats_asset(Pipeline.from_settings(settings))
    return dg.materialize(
        [asset],
        partition_key=day.isoformat(),
        resources={**build_resources(settings), "lineage": lineage},
        run_config={"ops": {"iceberg__default__supplier_stats": {"config": config or {}}}},
        raise_on_error=False,
    )
