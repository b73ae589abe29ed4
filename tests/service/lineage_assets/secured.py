"""Secured stand-ins for a team's external services, built from the stack's own services: an HTTP gate that lets a
request through to a real service only with the expected ``Authorization`` header (Marquez with an API key, the
registry with basic auth, the Iceberg catalog with a bearer token), and a Kafka broker that only speaks SASL/PLAIN.
The clients under test talk to the real services through them; nothing is answered by the gate itself except 401.
"""

from __future__ import annotations

import shutil
import socket
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import requests

from infra.artifacts import classpath
from infra.services.base import java_launch, port_open
from infra.services.kafka import _kafka_id


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class AuthGate:
    """``http://127.0.0.1:<port>`` forwarding to ``upstream`` when the request carries ``authorization``."""

    def __init__(self, upstream: str, authorization: str) -> None:
        self.upstream = upstream.rstrip("/")
        self.authorization = authorization
        self.refused: list[str] = []  # what the gate turned away (method and path)
        self.passed: list[str] = []
        gate = self

        class Handler(BaseHTTPRequestHandler):
            def _forward(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else None
                if self.headers.get("Authorization") != gate.authorization:
                    gate.refused.append(f"{self.command} {self.path}")
                    self.send_response(401)
                    self.send_header("Content-Type", "application/json")
                    self.end_headers()
                    self.wfile.write(b'{"error": "unauthorized"}')
                    return
                gate.passed.append(f"{self.command} {self.path}")
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "authorization")}
                resp = requests.request(self.command, gate.upstream + self.path, data=body, headers=headers, timeout=30)
                self.send_response(resp.status_code)
                for key in ("Content-Type", "Location"):
                    if key in resp.headers:
                        self.send_header(key, resp.headers[key])
                self.send_header("Content-Length", str(len(resp.content)))
                self.end_headers()
                self.wfile.write(resp.content)

            do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _forward

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def url_for(self, upstream_url: str) -> str:
        """``upstream_url`` (under the upstream root) as reached through the gate."""
        return self.url + upstream_url.removeprefix(self.upstream)

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


SASL_USER, SASL_PASSWORD = "lab-client", "lab-client-secret"


class SaslKafka:
    """A single-node KRaft broker whose only client listener is SASL_PLAINTEXT with PLAIN users (the stack's
    Kafka jars, 256 MiB heap), in ``home``."""

    def __init__(self, settings, home: Path) -> None:
        self.settings = settings
        self.home = home
        self.port, self.controller_port = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen | None = None

    def _properties(self) -> Path:
        jaas = (
            'org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" '
            f'password="broker-secret" user_broker="broker-secret" user_{SASL_USER}="{SASL_PASSWORD}";'
        )
        text = f"""
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}
listeners=SASL_PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}
advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}
controller.listener.names=CONTROLLER
inter.broker.listener.name=SASL_PLAINTEXT
listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT
sasl.enabled.mechanisms=PLAIN
sasl.mechanism.inter.broker.protocol=PLAIN
listener.name.sasl_plaintext.plain.sasl.jaas.config={jaas}
log.dirs={self.home / "data"}
offsets.topic.replication.factor=1
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
"""
        path = self.home / "server.properties"
        path.write_text(text)
        return path

    def start(self, timeout: float = 90.0) -> SaslKafka:
        self.home.mkdir(parents=True, exist_ok=True)
        props = self._properties()
        cp = classpath(self.settings.jars_dir, "kafka")
        fmt = java_launch(
            "kafka.tools.StorageTool",
            cp,
            256,
            args=["format", "--config", str(props), f"--cluster-id={_kafka_id(str(uuid.uuid4()))}", "--standalone"],
        )
        subprocess.run(fmt, check=True, capture_output=True, text=True)
        log = open(self.home / "broker.log", "wb")  # noqa: SIM115 - the broker writes to it until stop()
        self.proc = subprocess.Popen(
            java_launch("kafka.Kafka", cp, 256, args=[str(props)]),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if port_open("127.0.0.1", self.port) and self._ready():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"the SASL broker exited: {(self.home / 'broker.log').read_text()[-2000:]}")
            time.sleep(0.5)
        raise RuntimeError(f"the SASL broker is not ready after {timeout:.0f} s; see {self.home / 'broker.log'}")

    def _ready(self) -> bool:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import AdminClient

        admin = AdminClient(
            {
                "bootstrap.servers": self.bootstrap,
                "security.protocol": "SASL_PLAINTEXT",
                "sasl.mechanism": "PLAIN",
                "sasl.username": SASL_USER,
                "sasl.password": SASL_PASSWORD,
            }
        )
        try:
            return len(admin.list_topics(timeout=2).brokers) > 0
        except KafkaException:
            return False

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            import os
            import signal

            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
        shutil.rmtree(self.home / "data", ignore_errors=True)
