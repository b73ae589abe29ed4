"""Against the stack's Marquez: a run of every lineage check of every asset (the checks job's selection) reads the
graph ONCE, asks about the pipeline's own datasets only (never a namespace or dataset listing, which grows with other
teams' lineage), and its checks pass on the lineage the main job left.

Marquez requests are counted by wrapping ``MarquezClient._get`` in this process (``dg.materialize`` runs the step
in process); the expected counts are written by hand."""

from __future__ import annotations

import collections
from urllib.parse import quote

import dagster as dg
import pytest

from lineage_assets.checks.asset_checks import CHECKS, build_lineage_checks
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.metadata import asset_key
from lineage_assets.resources import build_resources

pytestmark = pytest.mark.service


def test_every_lineage_check_runs_on_one_read_of_our_part_of_marquez(settings, pipeline_ran, monkeypatch):
    pipeline = Pipeline.from_settings(settings)
    asked: collections.Counter[str] = collections.Counter()
    original = MarquezClient._get

    def counted(client, path, **params):
        asked[path] += 1
        return original(client, path, **params)

    monkeypatch.setattr(MarquezClient, "_get", counted)
    every = [dg.AssetCheckKey(asset_key(ds), name) for ds in pipeline.datasets.values() for name in CHECKS]
    resources = {k: v for k, v in build_resources(settings).items() if k in ("lineage", "flink", "connect")}

    result = dg.materialize(
        build_lineage_checks(pipeline),
        selection=dg.AssetSelection.checks(*every),
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
    )

    evaluations = result.get_asset_check_evaluations()
    assert len(evaluations) == 54  # 9 datasets x 6 checks
    assert len([e for e in result.all_events if e.is_step_start]) == 1
    for ds in pipeline.datasets.values():
        path = f"namespaces/{quote(ds.namespace, safe='')}/datasets/{quote(ds.name, safe='')}"
        assert asked[path] == 1, f"{ds.key} asked {asked[path]} times: one read of the graph asks once"
    assert [p for p in asked if p == "namespaces" or p.endswith(("/datasets", "/jobs"))] == []
    failed = [f"{e.asset_key.to_user_string()} {e.check_name}: {e.description}" for e in evaluations if not e.passed]
    assert failed == []
