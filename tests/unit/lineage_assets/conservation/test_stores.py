"""Which consumer group a job's input is read under: the engine's word first, then what Connect or the declaration
gives (fake engine clients: the choice is pure control flow)."""

from pathlib import Path
from types import SimpleNamespace

import pytest

from flink_jobs import deployment
from infra.settings import StackSettings
from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.stores import Stores
from lineage_assets.lineage.identity import Pipeline

PIPELINE = Pipeline.from_settings(StackSettings())


class Unreachable:
    def __getattr__(self, name):
        def call(*args, **kwargs):
            raise ConnectionError("refused")

        return call


def stores_with(connect=None, flink=None) -> Stores:
    resources = SimpleNamespace(
        connect=SimpleNamespace(client=lambda: connect or Unreachable()),
        flink=SimpleNamespace(client=lambda: flink or Unreachable()),
    )
    return Stores(PIPELINE, resources, Path("unused.sqlite"))


def test_a_sink_reads_under_the_group_its_config_overrides():
    connect = SimpleNamespace(config=lambda name: {"consumer.override.group.id": "archive-readers"})
    assert stores_with(connect).consumer_group("orders-s3-sink")[0] == "archive-readers"


def test_a_sink_without_an_override_reads_under_connects_own_group_name():
    connect = SimpleNamespace(config=lambda name: {"topics": "orders"})
    assert stores_with(connect).consumer_group("orders-s3-sink")[0] == "connect-orders-s3-sink"


def test_a_sink_whose_connect_does_not_answer_is_read_under_connects_own_group_name_and_says_so():
    group, where = stores_with().consumer_group("orders-s3-sink")
    assert (group, "did not answer" in where) == ("connect-orders-s3-sink", True)


def test_a_running_flink_job_is_read_under_the_group_it_was_deployed_with():
    flink = SimpleNamespace(
        current=lambda name: SimpleNamespace(jid="j1"),
        user_config=lambda jid: {deployment.ARGS: deployment.encode_json(["--group-id", "copy-2"])},
    )
    assert stores_with(flink=flink).consumer_group("iceberg-ingestion")[0] == "copy-2"


def test_a_flink_job_that_flink_does_not_know_falls_back_to_the_declared_group_or_says_what_to_declare():
    assert stores_with().consumer_group("supplier-stats")[0] == "supplier-stats"
    with pytest.raises(StoreUnavailable, match="declare it in CONSUMER_GROUPS"):
        stores_with().consumer_group("a-copy-nobody-declared")
