"""opened_resources: the wired resources with their EnvVars read, for code outside a Dagster run. Expected values by
hand."""

import pytest

from infra.settings import StackSettings
from lineage_assets.resources import opened_resources


def test_a_secret_given_by_its_variable_is_read_from_the_environment(monkeypatch):
    monkeypatch.setenv("LINEAGE_LAB_S3_SECRET_KEY", "from-the-environment")
    opened = opened_resources(StackSettings(), ["object_store", "iceberg"])
    assert opened.object_store.secret_access_key == "from-the-environment"
    assert opened.iceberg.secret_access_key == "from-the-environment"
    assert not hasattr(opened, "kafka")


def test_spark_and_unknown_names_are_refused_with_what_to_do():
    with pytest.raises(ValueError, match="inside a Dagster run"):
        opened_resources(StackSettings(), ["iceberg", "spark"])
    with pytest.raises(KeyError, match=r"no resource \['marquez'\]"):
        opened_resources(StackSettings(), ["marquez"])
