"""The version-drift warning: a running job whose code part differs from this checkout's names both versions."""

from pathlib import Path

from lineage_assets.flink.deploy import FlinkJobSpec
from lineage_assets.flink.version_drift import drift


class Spec(FlinkJobSpec):
    def code_version(self) -> str:
        return "c0ffee00"


SPEC = Spec("supplier-stats", Path("unused"))


def test_the_same_code_passes_whatever_its_settings():
    assert drift(SPEC, "c0ffee00.abcdef", "j1")[0]
    assert drift(SPEC, "c0ffee00.123456", "j1")[0], "a deployment's settings are not drift"


def test_older_code_warns_with_both_versions():
    passed, text = drift(SPEC, "deadbeef.abcdef", "j1")
    assert not passed
    assert "runs code deadbeef" in text and "would deploy code c0ffee00" in text and "j1" in text


def test_a_job_without_a_version_warns():
    passed, text = drift(SPEC, None, "j2")
    assert not passed and "carries no deployment version" in text


def test_the_checked_jobs_are_the_identity_modules_flink_jobs_with_their_outputs():
    from infra.settings import StackSettings
    from lineage_assets.flink import iceberg_ingestion_asset, supplier_stats_stream_asset
    from lineage_assets.flink.suspension import specs
    from lineage_assets.flink.version_drift import checkout_jobs
    from lineage_assets.lineage.identity import Pipeline

    pipeline = Pipeline.from_settings(StackSettings())
    assert checkout_jobs(pipeline) == {
        "iceberg-ingestion": (iceberg_ingestion_asset.SPEC, "iceberg_orders"),
        "supplier-stats": (supplier_stats_stream_asset.SPEC, "kafka_supplier_stats"),
    }
    assert specs(pipeline) == {
        "iceberg-ingestion": iceberg_ingestion_asset.SPEC,
        "supplier-stats": supplier_stats_stream_asset.SPEC,
    }


def test_a_flink_job_of_the_identity_module_without_code_fails_at_load(monkeypatch):
    import pytest

    from infra.settings import StackSettings
    from lineage_assets.flink import version_drift
    from lineage_assets.lineage.identity import Pipeline

    monkeypatch.delitem(version_drift.SPECS, "supplier-stats")
    with pytest.raises(KeyError, match="supplier-stats"):
        version_drift.checkout_jobs(Pipeline.from_settings(StackSettings()))
