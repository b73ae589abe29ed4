"""The Flink resource carries all its client needs: built by build_resources, it tells the stack's cluster (state
under the stack's home) from an external one without the settings."""

from pathlib import Path

from infra.settings import StackSettings
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.resources import build_resources


def test_the_stacks_cluster_keeps_its_state_under_the_stacks_home():
    client = build_resources(StackSettings(home=Path("/lab"), host="flink-host"))["flink"].client()
    assert client.url == "http://flink-host:8081"
    assert client.savepoint_dir("supplier-stats") == "file:///lab/data/flink/savepoints/supplier-stats"
    assert client.checkpoint_dir("supplier-stats") == "file:///lab/data/flink/checkpoints/supplier-stats"
    assert client.settings.s3_region == "us-east-1"


def test_an_external_cluster_keeps_its_own_state():
    settings = StackSettings(home=Path("/lab"), external_flink="http://jm:8081", s3_region="eu-west-1")
    client = build_resources(settings)["flink"].client()
    assert client.url == "http://jm:8081"
    assert client.savepoint_dir("supplier-stats") == ""
    assert client.checkpoint_dir("supplier-stats") == ""
    assert client.settings.s3_region == "eu-west-1"


def test_an_external_cluster_with_a_savepoint_folder_uses_it():
    settings = StackSettings(external_flink="http://jm:8081", flink_savepoint_dir="s3://state/savepoints/")
    client = build_resources(settings)["flink"].client()
    assert client.savepoint_dir("iceberg-ingestion") == "s3://state/savepoints/iceberg-ingestion"


def test_the_stacks_own_url_is_the_embedded_cluster_with_its_host_and_port():
    flink = FlinkResource(rest_url="http://10.0.0.5:18081", stack_host="10.0.0.5", stack_rest_port=18081)
    client = flink.client()
    assert flink.embedded
    assert (client.url, client.settings.external_flink) == ("http://10.0.0.5:18081", "")
    assert (client.settings.host, client.settings.flink_rest_port) == ("10.0.0.5", 18081)


def test_another_url_is_an_external_cluster_whatever_its_port():
    flink = FlinkResource(rest_url="https://flink.example.com/", stack_host="127.0.0.1", stack_rest_port=8081)
    client = flink.client()
    assert not flink.embedded
    assert (client.url, client.settings.external_flink) == ("https://flink.example.com", "https://flink.example.com/")
    assert not FlinkResource(rest_url="http://127.0.0.1:8081").embedded  # no stack named: external
    assert client.settings.flink_rest_port == StackSettings.flink_rest_port
