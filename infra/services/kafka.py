"""Kafka broker, single node in KRaft combined mode, from Maven Central jars."""

from __future__ import annotations

import subprocess
import uuid

from infra.artifacts import classpath
from infra.services.base import Launch, Service, java_launch, render

BUNDLE = "kafka"


class Kafka(Service):
    name = "kafka"
    bundles = (BUNDLE,)
    startup_timeout = 90.0

    @property
    def ports(self) -> tuple[int, ...]:
        return (self.settings.kafka_port, self.settings.kafka_controller_port)

    @property
    def properties(self):
        return self.conf_path / "server.properties"

    def _jvm_props(self) -> dict[str, str]:
        log4j = render("log4j2.yaml", self.conf_path / "log4j2.yaml", name=self.name)
        return {"log4j2.configurationFile": str(log4j), "kafka.logs.dir": str(self.settings.logs_dir)}

    def prepare(self) -> None:
        s = self.settings
        render(
            "kafka-server.properties",
            self.properties,
            host=s.host,
            bind_host=s.listen_host,
            port=s.kafka_port,
            controller_port=s.kafka_controller_port,
            log_dirs=self.data_path,
        )
        if (self.data_path / "meta.properties").exists():
            return
        self.data_path.mkdir(parents=True, exist_ok=True)
        cluster_id = str(uuid.uuid4())
        # kafka-storage.sh format --standalone: one controller that is its own quorum
        argv = java_launch(
            "kafka.tools.StorageTool",
            classpath(s.jars_dir, BUNDLE),
            256,
            args=["format", "--config", str(self.properties), f"--cluster-id={_kafka_id(cluster_id)}", "--standalone"],
            props=self._jvm_props(),
        )
        result = subprocess.run(argv, capture_output=True, text=True)
        if result.returncode != 0:
            raise self.fail(f"formatting the KRaft storage failed: {result.stdout}{result.stderr}")

    def launch(self) -> Launch:
        s = self.settings
        return Launch(
            java_launch(
                "kafka.Kafka",
                classpath(s.jars_dir, BUNDLE),
                s.kafka_heap_mb,
                args=[str(self.properties)],
                props=self._jvm_props(),
            )
        )

    def is_healthy(self) -> bool:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        if not super().is_healthy():
            return False
        admin = AdminClient({"bootstrap.servers": self.settings.kafka_bootstrap, "socket.timeout.ms": 2000})
        try:
            return len(admin.list_topics(timeout=2).brokers) > 0
        except KafkaException:
            return False


def _kafka_id(value: str) -> str:
    """Kafka cluster ids are 22-character URL-safe base64 UUIDs."""
    import base64

    return base64.urlsafe_b64encode(uuid.UUID(value).bytes).decode().rstrip("=")
