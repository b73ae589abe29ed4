"""One configuration channel: build_definitions(settings) hands the endpoints to the resources, and the assets,
checks, sensors and jobs reach them only there (no factory keeps the settings). Expected values written by hand."""

from __future__ import annotations

import dataclasses
import types
from pathlib import Path

from infra.settings import StackSettings
from lineage_assets.connect.configs import render_connector
from lineage_assets.definitions import build_definitions

ELSEWHERE = StackSettings(
    home=Path("/elsewhere"),
    external_kafka="kafka.prod:9093",
    external_schema_registry="https://registry.prod/apis/ccompat/v7",
    external_connect="http://connect.prod:8083",
    external_flink="http://jm.prod:8081",
    external_marquez="http://marquez.prod:5000",
    external_object_store="https://s3.prod",
    external_postgres="pg.prod:5433",
    s3_region="eu-west-1",
    archive_bucket="archive-prod",
)


def test_the_resources_carry_the_endpoints_of_the_settings_given():
    resources = build_definitions(ELSEWHERE).resources
    assert resources["kafka"].bootstrap_servers == "kafka.prod:9093"
    assert resources["kafka"].schema_registry_url == "https://registry.prod/apis/ccompat/v7"
    assert resources["flink"].rest_url == "http://jm.prod:8081"
    assert resources["flink"].client().url == "http://jm.prod:8081"
    assert resources["flink"].client().checkpoint_dir("supplier-stats") == "", "an external cluster keeps its own"
    assert (resources["source_db"].host, resources["source_db"].port) == ("pg.prod", 5433)
    assert resources["object_store"].endpoint == "https://s3.prod"
    assert resources["lineage"].backend_url == "http://marquez.prod:5000"
    assert resources["lineage"].outbox_path == "/elsewhere/data/lineage/outbox.sqlite"
    connect = resources["connect"]
    assert connect.url == "http://connect.prod:8083"
    sink = render_connector("orders-s3-sink", connect)
    assert sink["value.converter.apicurio.registry.url"] == "https://registry.prod/apis/registry/v2"
    assert (sink["s3.endpoint"], sink["s3.region"], sink["s3.bucket.name"]) == (
        "https://s3.prod",
        "eu-west-1",
        "archive-prod",
    )
    source = render_connector("orders-source", connect)
    assert (source["database.hostname"], source["database.port"]) == ("pg.prod", "5433")


def _captured(fn, seen: set[int]) -> list[object]:
    """Everything a function's closure holds, following nested functions and containers."""
    found: list[object] = []
    stack = [fn]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        found.append(item)
        if isinstance(item, types.FunctionType):
            stack += [c.cell_contents for c in item.__closure__ or () if c.cell_contents is not None]
        elif type(item) in (list, tuple, set, frozenset):
            stack += list(item)
        elif type(item) is dict:
            stack += list(item.values())
        elif dataclasses.is_dataclass(item) and not isinstance(item, type):
            stack += [getattr(item, f.name) for f in dataclasses.fields(item)]
    return found


def test_no_asset_check_sensor_or_job_keeps_the_settings():
    defs = build_definitions(ELSEWHERE)
    functions = [a.op.compute_fn.decorated_fn for a in defs.assets if hasattr(a, "op") and a.is_executable]
    functions += [c.node_def.compute_fn.decorated_fn for c in defs.asset_checks]
    functions += [s._raw_fn for s in defs.sensors]
    functions += [
        op.compute_fn.decorated_fn
        for job in defs.jobs
        if hasattr(job, "graph")
        for op in job.graph.node_defs
        if hasattr(op, "compute_fn")
    ]
    assert len(functions) > 15  # every asset, check, sensor and op function (18 at 2026-12-07)
    keeping = (lambda settings: lambda: settings)(ELSEWHERE)
    assert ELSEWHERE in _captured(keeping, set()), "the search finds settings a closure keeps"
    seen: set[int] = set()
    kept = [type(o).__name__ for fn in functions for o in _captured(fn, seen) if isinstance(o, StackSettings)]
    assert kept == []
