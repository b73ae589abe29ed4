"""The second Flink session cluster's layout (no cluster started): its own home, ports and state, no connector jars
and no OpenLineage listener unless asked for."""

import socket

import pytest

from infra.settings import StackSettings
from tests.support.flink_cluster import FlinkClusterError, FlinkSessionCluster


@pytest.fixture
def settings(tmp_path, monkeypatch):
    jars = tmp_path / "jars" / "flink-jars"
    jars.mkdir(parents=True)
    for name in ("flink-sql-connector-kafka-4.0.1-2.0.jar", "openlineage-flink-1.53.0.jar"):
        (jars / name).write_text("")
    monkeypatch.setenv("LINEAGE_LAB_JARS_DIR", str(tmp_path / "jars"))
    return StackSettings(home=tmp_path / "lab")


def test_the_second_cluster_has_its_own_home_ports_and_state_and_no_jars(settings, tmp_path):
    cluster = FlinkSessionCluster(settings, tmp_path / "b")
    layout = cluster.layout
    assert cluster.rest_url == "http://127.0.0.1:8095"
    assert (layout.rest_port, layout.rpc_port) == (8095, 6133)
    assert layout.home == tmp_path / "b" / "flink" and layout.log_dir == tmp_path / "b" / "log"
    assert layout.savepoints == f"file://{tmp_path / 'b' / 'data' / 'savepoints'}"
    assert layout.lib_jars == () and layout.openlineage_file is None
    assert layout.slots >= 4, "supplier-stats (3 partitions) and iceberg-ingestion (1) at once"
    assert layout.python == settings.flink_venv / "bin" / "python"
    assert layout.env()["FLINK_CONF_DIR"] == str(tmp_path / "b" / "flink" / "conf")


def test_with_openlineage_only_the_listener_jar_is_in_lib(settings, tmp_path):
    layout = FlinkSessionCluster(settings, tmp_path / "b", openlineage=True).layout
    assert [j.name for j in layout.lib_jars] == ["openlineage-flink-1.53.0.jar"]
    assert layout.openlineage_file == tmp_path / "b" / "openlineage.jsonl"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_port_in_use_is_a_clear_error_before_anything_starts(settings, tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        cluster = FlinkSessionCluster(settings, tmp_path / "b", rest_port=port, rpc_port=free_port())
        with pytest.raises(FlinkClusterError, match=rf"ports \[{port}\] on 127.0.0.1 are in use"):
            cluster.start()
    assert not (tmp_path / "b").exists()
