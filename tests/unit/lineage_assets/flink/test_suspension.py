"""lineage_assets/flink/suspension.py takes the wired resources from its caller (it sits below the wiring)."""

import dataclasses

from infra.settings import StackSettings
from lineage_assets.flink import suspension


def test_an_external_cluster_is_left_alone_without_touching_the_resources():
    settings = dataclasses.replace(StackSettings(), external_flink="http://jobmanager:8081")
    assert suspension.suspend(settings, {}) == []
    assert suspension.resume(settings, {}) == []


def test_nothing_recorded_nothing_resumed(tmp_path):
    settings = dataclasses.replace(StackSettings(), home=tmp_path)
    assert not suspension.suspended_file(settings).exists()
    assert suspension.resume(settings, {}) == []


def test_only_the_resources_it_uses_are_taken():
    wired = {"kafka": 1, "iceberg": 2, "lineage": 3, "flink": 4, "spark": 5}
    assert suspension._resources(wired) == {"kafka": 1, "iceberg": 2, "lineage": 3}
