"""FlinkResource.client: the stack's own cluster or an external one, from the resource's fields alone. Expected
values by hand."""

from infra.settings import StackSettings
from lineage_assets.flink.resource import FlinkResource


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
