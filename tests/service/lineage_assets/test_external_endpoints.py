"""Every service can be external, with credentials: `stack up` leaves external services alone, `stack status` shows
them, and each client of the project authenticates the way the real service expects (Marquez's API key as a bearer
token, the registry's basic auth, the Iceberg catalog's token, Kafka's SASL in librdkafka and in Java), through
gates in front of the stack's real services (tests/service/lineage_assets/secured.py)."""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from openlineage.client.event_v2 import Job, Run, RunEvent, RunState

from infra.artifacts import classpath
from infra.services.base import java_binary
from infra.settings import REPO_ROOT
from lineage_assets.checks.drift_report import verify_and_render
from lineage_assets.kafka.registry import RegistryError, latest_schema
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import KafkaUnavailable, TopicError, TopicSpec, end_offsets, ensure_topic
from lineage_assets.lineage.marquez_client import MarquezError
from lineage_assets.lineage.outbox import Outbox
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.storage import IcebergResource
from tests.service.lineage_assets.conftest import TEST_JOB_NAMESPACE
from tests.service.lineage_assets.secured import SASL_PASSWORD, SASL_USER, AuthGate, SaslKafka, free_port

pytestmark = pytest.mark.usefixtures("forget_test_jobs")  # its jobs in TEST_JOB_NAMESPACE go after it

CLI = [sys.executable, "-m", "lineage_assets.cli"]


def _run_cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, cwd=REPO_ROOT, env={**os.environ, **env})


def test_stack_up_leaves_external_services_alone_and_status_shows_them(settings, tmp_path: Path):
    gate = AuthGate(settings.marquez_url, "Bearer irrelevant")
    dead = f"127.0.0.1:{free_port()}"
    env = {
        "LINEAGE_LAB_HOME": str(tmp_path),  # a state dir of its own: nothing of the running stack is touched
        "LINEAGE_LAB_EXTERNAL_MARQUEZ": gate.url,
        "LINEAGE_LAB_EXTERNAL_KAFKA": dead,
    }
    try:
        up = _run_cli("stack", "up", "marquez", "kafka", env=env)
        status = _run_cli("stack", "status", env=env)
    finally:
        gate.close()
    assert up.returncode == 0, up.stdout + up.stderr
    assert f"marquez: external at {gate.url} (reachable), not started" in up.stdout
    assert f"kafka: external at {dead} (NOT reachable), not started" in up.stdout
    assert "Starting 0 service(s)" in up.stdout
    assert not list(tmp_path.glob("run/*.pid")), "a service was started"
    rows = {line.split()[0]: line for line in status.stdout.splitlines()[1:] if line.strip()}
    assert "external" in rows["marquez"] and gate.url in rows["marquez"] and "unreachable" not in rows["marquez"]
    assert "external, unreachable" in rows["kafka"] and dead in rows["kafka"]
    assert "marquez-web" in rows and "external" in rows["marquez-web"]
    assert rows["postgres"].endswith("postgres.log"), "an embedded service is listed with its log as before"
    assert status.returncode == 3, "an unreachable external service makes status fail"


def _event(job: str, state: RunState, run_id: str) -> RunEvent:
    return RunEvent(
        eventType=state,
        eventTime=dt.datetime.now(dt.UTC).isoformat(),
        run=Run(runId=run_id),
        job=Job(namespace=TEST_JOB_NAMESPACE, name=job),
        producer="https://github.com/lineage-lab/tests",
    )


def test_marquez_behind_an_api_key(settings, tmp_path: Path):
    key = f"key-{uuid.uuid4().hex}"
    gate = AuthGate(settings.marquez_url, f"Bearer {key}")
    outbox = tmp_path / "outbox.sqlite"
    job = f"api-key-{uuid.uuid4().hex[:8]}"
    try:
        wrong = LineageResource(outbox_path=str(outbox), backend_url=gate.url, api_key="not-the-key")
        emitter = wrong.emitter()
        first = str(uuid.uuid4())
        emitter.emit(_event(job, RunState.START, first))
        assert not emitter.flush(timeout=3), "an event went through with a wrong key"
        counts = Outbox(outbox).counts()
        assert (counts.queued, counts.rejected) == (1, 0), "a refused key must keep the event, not drop it"
        assert "refused the credentials" in Outbox(outbox).pending_errors()[0][2]
        with pytest.raises(MarquezError, match="refused the credentials"):
            wrong.marquez().job(TEST_JOB_NAMESPACE, job)

        right = LineageResource(outbox_path=str(outbox), backend_url=gate.url, api_key=key)
        emitter = right.emitter()
        emitter.emit(_event(job, RunState.COMPLETE, first))
        assert emitter.flush(timeout=30), Outbox(outbox).pending_errors()
        assert Outbox(outbox).counts().sent == 2, "the event queued under the wrong key was delivered later"
        held = right.marquez().job(TEST_JOB_NAMESPACE, job)
        assert held is not None and held["latestRun"]["id"] == first and held["latestRun"]["state"] == "COMPLETED"
        assert any(p.startswith("POST /api/v1/lineage") for p in gate.passed)

        # verify reads the whole graph through the gate with the key from the settings
        external = dataclasses.replace(settings, external_marquez=gate.url, marquez_api_key=key)
        report, _ = verify_and_render(external, tmp_path / "graph.html")
        assert f"Marquez at {gate.url}" in report.text()
        assert any(p.startswith("GET /api/v1/") for p in gate.passed)
    finally:
        gate.close()


SUBJECT_SCHEMA = {
    "type": "record",
    "name": "AuthProbe",
    "fields": [{"name": "order_id", "type": "string"}, {"name": "price", "type": "string"}],
}


def test_registry_behind_basic_auth(settings):
    import json

    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

    topic = f"auth-probe-{uuid.uuid4().hex[:8]}"  # a subject of its own: the test needs no pipeline state
    direct_client = SchemaRegistryClient({"url": settings.schema_registry_url})
    schema_id = direct_client.register_schema(f"{topic}-value", Schema(json.dumps(SUBJECT_SCHEMA), "AVRO"))
    root = settings.schema_registry_url.split("/apis/", 1)[0]
    gate = AuthGate(root, "Basic " + base64.b64encode(b"lab:registry-secret").decode())
    try:
        url = gate.url_for(settings.schema_registry_url)
        kafka = KafkaResource(
            bootstrap_servers=settings.kafka_bootstrap,
            schema_registry_url=url,
            schema_registry_user_info="lab:registry-secret",
        )
        through = latest_schema(kafka.registry(), topic)
        assert through is not None and through.schema_id == schema_id
        assert [c.name for c in through.columns] == ["order_id", "price"]
        assert through == latest_schema(settings.schema_registry_url, topic)
        # (the Flink jobs' decoder sends the same basic-auth header: RegistrySchemasTest of flink_jobs/order-functions)

        wrong = KafkaResource(
            bootstrap_servers=settings.kafka_bootstrap, schema_registry_url=url, schema_registry_user_info="lab:wrong"
        )
        with pytest.raises(RegistryError, match="refused the credentials"):
            latest_schema(wrong.registry(), topic)
        assert gate.refused, "the gate never saw the wrong credentials"
    finally:
        gate.close()
        direct_client.delete_subject(f"{topic}-value")


def test_iceberg_catalog_behind_a_token(settings):
    import pyarrow as pa

    gate = AuthGate(settings.iceberg_catalog_url, "Bearer catalog-token")
    common = {
        "s3_endpoint": settings.s3_endpoint,
        "access_key_id": settings.s3_access_key,
        "secret_access_key": settings.s3_secret_key,
        "region": settings.s3_region,
    }
    direct = IcebergResource(uri=settings.iceberg_catalog_url, **common).catalog()
    name = f"auth_probe.t_{uuid.uuid4().hex[:8]}"  # a table of its own: the test needs no pipeline state
    direct.create_namespace_if_not_exists("auth_probe")
    created = direct.create_table(name, schema=pa.schema([("order_id", pa.string())]))
    try:
        table = IcebergResource(uri=gate.url, **common, token="catalog-token").catalog().load_table(name)
        assert table.schema() == created.schema() and table.metadata_location == created.metadata_location
        with pytest.raises(Exception, match=r"(?i)unauthorized|401"):
            IcebergResource(uri=gate.url, **common).catalog().load_table(name)
    finally:
        gate.close()
        direct.drop_table(name)


@pytest.fixture(scope="module")
def sasl_kafka(settings, tmp_path_factory):
    broker = SaslKafka(settings, tmp_path_factory.mktemp("sasl-kafka")).start()
    yield broker
    broker.stop()


JAVA_PROBE = """
import java.io.FileReader;
import java.util.Properties;
import org.apache.kafka.clients.admin.Admin;

public class Probe {
    public static void main(String[] args) throws Exception {
        Properties props = new Properties();
        props.load(new FileReader(args[0]));
        try (Admin admin = Admin.create(props)) {
            System.out.println("topics=" + admin.listTopics().names().get());
        }
    }
}
"""


def test_kafka_with_sasl_from_librdkafka_and_java(settings, sasl_kafka: SaslKafka, tmp_path: Path):
    kafka = KafkaResource(
        bootstrap_servers=sasl_kafka.bootstrap,
        schema_registry_url=settings.schema_registry_url,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_username=SASL_USER,
        sasl_password=SASL_PASSWORD,
    )
    conn = kafka.connection()
    topic = TopicSpec("orders", 3, 3_600_000)
    assert ensure_topic(conn, topic) == "created"
    producer = Producer(conn.client_config())
    for i in range(5):
        producer.produce("orders", key=str(i), value=f"order-{i}".encode(), partition=i % 3)
    assert producer.flush(30) == 0
    assert sum(end_offsets(conn, "orders").values()) == 5
    consumer = Consumer(conn.client_config(**{"group.id": f"t-{uuid.uuid4()}", "enable.auto.commit": False}))
    try:
        consumer.assign([TopicPartition("orders", p, 0) for p in range(3)])
        got = []
        while len(got) < 5:
            msgs = consumer.consume(10, timeout=5)
            assert msgs, f"only {len(got)} of 5 records came back"
            got += [m.value() for m in msgs if not m.error()]
    finally:
        consumer.close()
    assert sorted(got) == [f"order-{i}".encode() for i in range(5)]

    # the Java client properties the Flink jobs and Connect get work against the same listener
    props = tmp_path / "client.properties"
    lines = [f"bootstrap.servers={conn.bootstrap}", *(f"{k}={v}" for k, v in conn.java_properties().items())]
    props.write_text("\n".join(lines) + "\n")
    probe = tmp_path / "Probe.java"
    probe.write_text(JAVA_PROBE)
    cp = classpath(settings.jars_dir, "kafka")
    java = subprocess.run(
        [java_binary(), "-cp", cp, str(probe), str(props)], capture_output=True, text=True, timeout=120
    )
    assert java.returncode == 0, java.stderr[-2000:]
    assert "orders" in java.stdout

    # a wrong password is a clear error that names the broker and what to check, not a hang
    wrong = dataclasses.replace(conn, sasl_password="wrong")
    with pytest.raises((KafkaUnavailable, TopicError), match=f"{sasl_kafka.bootstrap}.*(SASL|unreachable)"):
        end_offsets(wrong, "orders", timeout=5)
