"""Kafka Connect, distributed mode, with the connector plugins of the pipeline on its plugin path."""

from __future__ import annotations

import shutil
from pathlib import Path

from infra.artifacts import bundle_dir, classpath, load_manifest
from infra.kafka_connection import KafkaConnection
from infra.services.base import Launch, Service, http_ok, java_launch, render
from infra.settings import REGISTRY_PASSWORD_ENV

RUNTIME = "connect-runtime"
PLUGIN_PREFIX = "connect-plugin-"


def worker_security_lines(kafka: KafkaConnection) -> str:
    """The cluster's security settings for the worker itself and, prefixed, for the producers, consumers and admin
    clients it creates for connectors (Connect does not pass the worker's own settings on to them)."""
    props = kafka.java_properties()
    lines = [f"{prefix}{k}={v}" for prefix in ("", "producer.", "consumer.", "admin.") for k, v in props.items()]
    return "\n".join(line.replace("\\", "\\\\") for line in lines)


def plugin_bundles() -> tuple[str, ...]:
    """Every manifest bundle named ``connect-plugin-*`` is one plugin directory."""
    return tuple(name for name in load_manifest() if name.startswith(PLUGIN_PREFIX))


class KafkaConnect(Service):
    name = "kafka-connect"
    startup_timeout = 180.0

    @property
    def bundles(self) -> tuple[str, ...]:  # type: ignore[override]
        return (RUNTIME, *plugin_bundles())

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.connect_port,)

    @property
    def plugin_path(self) -> Path:
        """One folder holding one sub-folder per plugin (Connect isolates each sub-folder in its own loader)."""
        return self.conf_path / "plugins"

    def prepare(self) -> None:
        s = self.settings
        shutil.rmtree(self.plugin_path, ignore_errors=True)
        self.plugin_path.mkdir(parents=True)
        for bundle in plugin_bundles():
            (self.plugin_path / bundle.removeprefix(PLUGIN_PREFIX)).symlink_to(bundle_dir(s.jars_dir, bundle))
        render(
            "connect-distributed.properties",
            self.conf_path / "connect-distributed.properties",
            bootstrap=s.kafka_bootstrap,
            host=s.host,
            bind_host=s.listen_host,
            port=s.connect_port,
            plugin_path=self.plugin_path,
            kafka_security=worker_security_lines(KafkaConnection.from_settings(s)),
        )
        # the rendered file can hold a SASL password: readable by its owner only
        (self.conf_path / "connect-distributed.properties").chmod(0o600)
        render("log4j2.yaml", self.conf_path / "log4j2.yaml", name=self.name)

    def launch(self) -> Launch:
        s = self.settings
        return Launch(
            java_launch(
                "org.apache.kafka.connect.cli.ConnectDistributed",
                classpath(s.jars_dir, RUNTIME),
                s.connect_heap_mb,
                args=[str(self.conf_path / "connect-distributed.properties")],
                props={"log4j2.configurationFile": str(self.conf_path / "log4j2.yaml")},
            ),
            # connectors that use the AWS SDK v2 against s3proxy
            env={
                **s.aws_sdk_env(),
                # secrets connector configs reference as ${env:...} (EnvVarConfigProvider)
                "LINEAGE_LAB_S3_ACCESS_KEY": s.s3_access_key,
                "LINEAGE_LAB_S3_SECRET_KEY": s.s3_secret_key,
                "LINEAGE_LAB_SOURCE_DB_PASSWORD": s.source_db_password,
                REGISTRY_PASSWORD_ENV: s.schema_registry_user_info.partition(":")[2],
            },
        )

    def is_healthy(self) -> bool:
        # /connectors answers only once the worker has joined its group and read the config topic
        return http_ok(f"{self.settings.connect_url}/connectors", timeout=3)
