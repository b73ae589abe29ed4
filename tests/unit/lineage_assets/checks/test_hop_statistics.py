"""Which open run the conservation check tells what its hop moved: never a Flink deployment replaced since the
materialization that names its run (fakes of the instance and the engines: pure control flow)."""

from types import SimpleNamespace

from infra.settings import StackSettings
from lineage_assets.checks.hop_statistics import RUN_ID, tell_open_run
from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.hops import hops
from lineage_assets.flink.client import FlinkError, FlinkJob
from lineage_assets.lineage.identity import Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())
HOP = hops(PIPELINE)["supplier-stats"]
BALANCE = HopBalance("supplier-stats", "i", ("o",), 10, 10, 0, 0)


def instance_naming(run_id: str):
    materialization = SimpleNamespace(metadata={RUN_ID: SimpleNamespace(value=run_id)})
    return SimpleNamespace(
        get_latest_materialization_event=lambda key: SimpleNamespace(asset_materialization=materialization)
    )


def resources(active):
    emitted = []

    class Client:
        def active(self, name):
            if isinstance(active, Exception):
                raise active
            return active

    lineage = SimpleNamespace(outbox=lambda: SimpleNamespace(ended=lambda run: False), emitter=lambda: emitted)
    return SimpleNamespace(lineage=lineage, flink=SimpleNamespace(client=Client)), emitted


def test_a_run_whose_deployment_was_replaced_is_not_told():
    found, emitted = resources(FlinkJob("new-jid", "supplier-stats", "RUNNING", 1_765_000_000_000))
    told = tell_open_run(instance_naming("old-run"), PIPELINE, HOP, "key", BALANCE, None, found)
    assert told.startswith("run old-run is not the running deployment's (") and told.endswith("): not told")
    assert emitted == []


def test_no_running_deployment_or_no_answer_tells_nothing():
    for active in (None, FlinkError("connection refused")):
        found, emitted = resources(active)
        told = tell_open_run(instance_naming("old-run"), PIPELINE, HOP, "key", BALANCE, None, found)
        assert told == "run old-run is not the running deployment's (none runs): not told"
        assert emitted == []
