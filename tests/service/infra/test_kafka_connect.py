"""Connect's REST API lists the plugins the pipeline's connectors need."""

from pathlib import Path

import requests

from infra.services.kafka_connect import PLUGIN_PREFIX, plugin_bundles


def test_worker_lists_the_pipeline_plugins(settings):
    plugins = requests.get(f"{settings.connect_url}/connector-plugins", params={"connectorsOnly": "false"}, timeout=10)
    plugins.raise_for_status()
    classes = {p["class"]: p["type"] for p in plugins.json()}
    assert classes.get("io.debezium.connector.postgresql.PostgresConnector") == "source"
    assert classes.get("lab.lineage.connect.s3.S3JsonLinesSinkConnector") == "sink"
    assert classes.get("io.apicurio.registry.utils.converter.AvroConverter") == "converter"


def test_every_plugin_bundle_is_one_isolated_plugin_folder(settings):
    worker_conf = (settings.conf_dir / "kafka-connect" / "connect-distributed.properties").read_text()
    plugin_path = Path(
        next(line for line in worker_conf.splitlines() if line.startswith("plugin.path=")).split("=", 1)[1]
    )
    folders = {p.name for p in plugin_path.iterdir() if p.is_dir()}
    assert folders == {b.removeprefix(PLUGIN_PREFIX) for b in plugin_bundles()}
