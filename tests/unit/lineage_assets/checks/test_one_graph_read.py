"""A check run reads the Marquez graph ONCE, however many assets' checks it evaluates, and that read asks about the
pipeline's own nodes only (never a listing of Marquez's namespaces or datasets, which grows with other teams).

A counting fake stands in for Marquez (pure counting: what is asked, how often); the checks run through Dagster
like the checks job runs them."""

from __future__ import annotations

import collections
from urllib.parse import unquote

import dagster as dg

from infra.settings import StackSettings
from lineage_assets.checks.asset_checks import CHECKS, build_lineage_checks
from lineage_assets.checks.compare import no_second_identity
from lineage_assets.checks.marquez_graph import from_marquez
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key

SETTINGS = StackSettings()
PIPELINE = Pipeline.from_settings(SETTINGS)


class FakeMarquez(MarquezClient):
    """Answers every GET from ``datasets`` (identity -> fields) and ``search`` hits, and records each path asked."""

    def __init__(self, datasets: dict[tuple[str, str], list[str]], search: list[tuple[str, str]] = ()) -> None:
        super().__init__("http://marquez.invalid")
        self.known = datasets
        self.hits = list(search)
        self.asked: collections.Counter[str] = collections.Counter()

    def _get(self, path: str, **params):
        self.asked[path] += 1
        parts = [unquote(p) for p in path.split("/")]
        if parts[0] == "namespaces" and len(parts) == 4 and parts[2] == "datasets":
            fields = self.known.get((parts[1], parts[3]))
            if fields is None:
                return None
            return {"namespace": parts[1], "name": parts[3], "fields": [{"name": f, "type": "string"} for f in fields]}
        if parts[0] == "search":
            hits = [{"namespace": ns, "name": n} for ns, n in self.hits if params["q"] in n]
            return {"results": hits, "totalCount": len(hits)}
        if parts[0] in ("lineage", "column-lineage"):
            return {"graph": []}
        if parts[0] == "namespaces" and parts[-1] == "runs":
            return {"runs": []}
        return None  # a job Marquez does not have, or a listing (asserted never asked)


#: the fake the resources below hand out (resources are copied by Dagster, so it lives at module level)
FAKE: dict[str, object] = {}


class CountingLineage(LineageResource):
    def marquez(self) -> MarquezClient:
        FAKE["reads"] = int(FAKE.get("reads", 0)) + 1
        return FAKE["client"]  # type: ignore[return-value]


class NoFlink(FlinkResource):
    def client(self):  # no engine to ask: check (d) says so and passes
        return None


class NoConnect(ConnectResource):
    def client(self):
        return None


def run_checks(tmp_path, selection: list[dg.AssetCheckKey]) -> dg.ExecuteInProcessResult:
    resources = {
        "lineage": CountingLineage(outbox_path=str(tmp_path / "outbox.sqlite"), backend_url="http://marquez.invalid"),
        "flink": NoFlink(rest_url="http://flink.invalid"),
        "connect": NoConnect(url="http://connect.invalid"),
    }
    return dg.materialize(
        build_lineage_checks(PIPELINE),
        selection=dg.AssetSelection.checks(*selection),
        resources=resources,
        instance=dg.DagsterInstance.ephemeral(),
    )


def declared() -> dict[tuple[str, str], list[str]]:
    return {(ds.namespace, ds.name): [c.name for c in ds.columns] for ds in PIPELINE.datasets.values()}


def listings(asked: collections.Counter[str]) -> list[str]:
    """Paths that list a namespace's datasets or jobs, or the namespaces: they grow with other teams' lineage."""
    return [p for p in asked if p == "namespaces" or p.endswith(("/datasets", "/jobs"))]


def test_every_lineage_check_of_every_asset_runs_in_one_step_on_one_graph_read(tmp_path):
    FAKE.clear()
    FAKE["client"] = fake = FakeMarquez(declared())
    every = [dg.AssetCheckKey(asset_key(ds), name) for ds in PIPELINE.datasets.values() for name in CHECKS]
    assert len(every) == 54  # 9 datasets x 6 checks, counted by hand

    result = run_checks(tmp_path, every)

    evaluated = sorted((str(e.asset_key), e.check_name) for e in result.get_asset_check_evaluations())
    assert evaluated == sorted((str(k.asset_key), k.name) for k in every)
    assert len([e for e in result.all_events if e.is_step_start]) == 1
    assert FAKE["reads"] == 1
    orders = "namespaces/kafka%3A%2F%2F127.0.0.1%3A9092/datasets/orders"
    assert fake.asked[orders] == 1, "one read of the graph asks for each declared dataset once"
    assert listings(fake.asked) == []


def test_a_subset_evaluates_only_the_selected_checks_on_one_read(tmp_path):
    FAKE.clear()
    FAKE["client"] = FakeMarquez(declared())
    orders, archive = PIPELINE.dataset("kafka_orders"), PIPELINE.dataset("archive_orders")
    selection = [
        dg.AssetCheckKey(asset_key(orders), "lineage_schema_matches"),
        dg.AssetCheckKey(asset_key(archive), "lineage_dataset_exists"),
        dg.AssetCheckKey(asset_key(archive), "lineage_upstream_matches"),
    ]

    result = run_checks(tmp_path, selection)

    evaluated = sorted((e.asset_key.to_user_string(), e.check_name) for e in result.get_asset_check_evaluations())
    assert evaluated == [
        ("kafka/orders", "lineage_schema_matches"),
        ("s3/orders_archive", "lineage_dataset_exists"),
        ("s3/orders_archive", "lineage_upstream_matches"),
    ]
    assert FAKE["reads"] == 1


def test_the_read_never_lists_marquez_and_finds_a_second_spelling_by_name():
    fake = FakeMarquez(
        {**declared(), ("kafka://localhost:9092", "orders"): ["order_id"]},
        search=[("kafka://127.0.0.1:9092", "orders"), ("kafka://localhost:9092", "orders"), ("other-team", "orders")],
    )

    graph = from_marquez(fake, PIPELINE)

    assert listings(fake.asked) == []
    assert ("kafka://localhost:9092", "orders") in graph.datasets
    assert ("other-team", "orders") not in graph.datasets, "another team's orders is other data: not read"
    finding = no_second_identity(graph, PIPELINE.dataset("kafka_orders"))
    assert not finding.passed
    assert "kafka://localhost:9092/orders" in finding.message
