"""``lineage-lab impact orders.price`` against the Marquez the main job filled: exactly the downstream columns,
datasets and jobs that the identity module's declared lineage leads to (an expectation computed here, not by the
code under test), supplier_stats.total_price in both the Kafka and the Iceberg output, and the CLI says the same."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from infra.settings import REPO_ROOT
from lineage_assets.checks.verify import expected_column_edges
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.impact import impact, resolve
from lineage_assets.lineage.marquez import MarquezClient


def declared_downstream(pipeline: Pipeline, key: str, column: str):
    """(columns, datasets, jobs) downstream of ``key``.``column`` by the declared graph alone."""
    edges = expected_column_edges(pipeline)
    start = pipeline.dataset(key)
    columns, frontier = set(), {((start.namespace, start.name), column)}
    while frontier:
        nxt = {(out, out_col) for src, src_col, out, out_col in edges if (src, src_col) in frontier}
        frontier = nxt - columns
        columns |= nxt
    datasets, jobs, frontier = set(), set(), {key}
    while frontier:
        readers = [j for j in pipeline.jobs.values() if set(j.inputs) & frontier]
        jobs |= {j.name for j in readers}
        outputs = {o for j in readers for o in j.outputs} - datasets
        datasets |= outputs
        frontier = outputs
    return {(ns, name, col) for (ns, name), col in columns}, datasets, jobs


def test_impact_of_orders_price_is_the_declared_downstream_as_marquez_holds_it(settings, pipeline_ran):
    pipeline = Pipeline.from_settings(settings)
    target = resolve(pipeline, "orders.price")
    assert target.dataset.key == "kafka_orders"
    found = impact(MarquezClient(settings.marquez_url), target)

    columns, datasets, jobs = declared_downstream(pipeline, "kafka_orders", "price")
    assert set(found.columns) == columns
    for key in ("kafka_supplier_stats", "iceberg_supplier_stats"):
        ds = pipeline.dataset(key)
        assert (ds.namespace, ds.name, "total_price") in found.columns, key
    assert set(found.datasets) == {(pipeline.dataset(k).namespace, pipeline.dataset(k).name) for k in datasets}
    # Marquez files Spark's edges on the application's action jobs, named under it
    found_jobs = {name for _, name in found.jobs}
    for job in jobs:
        assert job in found_jobs or any(n.startswith(job + ".") for n in found_jobs), (job, found_jobs)
    assert set(found.assets(pipeline)) == {"/".join(pipeline.dataset(k).asset_key) for k in datasets}

    cli = subprocess.run(
        [str(Path(sys.executable).with_name("lineage-lab")), "impact", "orders.price", "--json"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert cli.returncode == 0, cli.stderr
    printed = json.loads(cli.stdout)
    assert {(c["namespace"], c["name"], c["column"]) for c in printed["columns"]} == columns
    assert printed["assets"] == found.assets(pipeline)
