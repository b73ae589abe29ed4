"""lineage_assets/flink/suspension.py takes the wired resources from its caller (it sits below the wiring)."""

import dataclasses
from types import SimpleNamespace

from infra.settings import StackSettings
from lineage_assets.flink import suspension


def test_an_external_cluster_is_left_alone_without_touching_the_resources():
    settings = dataclasses.replace(StackSettings(), external_flink="http://jobmanager:8081")
    assert suspension.suspend(settings, SimpleNamespace()) == []
    assert suspension.resume(settings, SimpleNamespace()) == []


def test_nothing_recorded_nothing_resumed(tmp_path):
    settings = dataclasses.replace(StackSettings(), home=tmp_path)
    assert not suspension.suspended_file(settings).exists()
    assert suspension.resume(settings, SimpleNamespace()) == []


def test_the_resources_it_asks_its_caller_to_open_are_those_it_uses():
    """Written by hand: Kafka's registry and security, the Iceberg catalog, the lineage outbox; never Spark."""
    assert suspension.RESOURCE_KEYS == ("kafka", "iceberg", "lineage")
