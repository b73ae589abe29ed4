"""Observed lineage: Marquez shows what each engine runs, and the declaration is only the expectation.

Every outside change goes through the engine's own interface (Flink's CLI and REST API, Connect's REST API); every
judgement reads Marquez's REST API with plain HTTP and the engine's REST API, and runs the check and
``lineage-lab verify`` as a user would. Expected names are spelled here by hand from the stack's host and ports.
Each test waits for one event in Marquez (the job's current version naming the new dataset), then asserts once, and
puts the pipeline back as it found it, waiting for Marquez to show the declared lineage again.
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from urllib.parse import quote

import dagster as dg
import pytest
import requests
from confluent_kafka.admin import AdminClient, NewTopic

from infra.services.flink import flink_cli, order_functions_jar
from infra.settings import REPO_ROOT
from lineage_assets.checks.engine_lineage import build_engine_lineage_check
from lineage_assets.flink.deploy import job_environment
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.resources import build_resources
from tests.support.engine_waits import completed_checkpoint, wait_for
from tests.support.marquez_runs import marquez_runs
from tests.support.outside_flink import cancel, flink, job_args, restart_with_flink_cli, running_jid

pytestmark = pytest.mark.service

NAMESPACE = "lineage-lab"
CHECK = "lineage_engine_matches_declaration"


def marquez_job(settings, job: str) -> dict:
    url = f"{settings.marquez_url}/api/v1/namespaces/{NAMESPACE}/jobs/{quote(job, safe='')}"
    return requests.get(url, timeout=10).json()


def io_of(settings, job: str) -> tuple[set[str], set[str]]:
    """The job's current inputs and outputs in Marquez, as ``namespace/name``."""
    body = marquez_job(settings, job)
    names = {kind: {f"{d['namespace']}/{d['name']}" for d in body.get(kind, [])} for kind in ("inputs", "outputs")}
    return names["inputs"], names["outputs"]


def writes(settings) -> set[str]:
    return io_of(settings, "supplier-stats")[1]


def sink_reads(settings) -> set[str]:
    return io_of(settings, "orders-s3-sink")[0]


def engine_check(settings, dataset: str) -> dg.AssetCheckEvaluation:
    """The engine-lineage check of ``dataset``'s asset, run as the UI runs one check."""
    pipeline = Pipeline.from_settings(settings)
    key = dg.AssetKey(list(pipeline.dataset(dataset).asset_key))
    checks = build_engine_lineage_check(pipeline)
    with dg.DagsterInstance.ephemeral() as instance:
        result = dg.materialize(
            [dg.AssetSpec(key), *checks],
            selection=dg.AssetSelection.checks(dg.AssetCheckKey(key, CHECK)),
            resources=build_resources(settings),
            instance=instance,
        )
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def verify(settings) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "lineage_assets.cli", "verify"],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        timeout=300,
    )


@pytest.fixture(scope="module")
def kafka_ns(settings) -> str:
    return f"kafka://{settings.host}:{settings.kafka_port}"


def ensure_topic(settings, name: str) -> None:
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    futures = admin.create_topics([NewTopic(name, 1, 1)], request_timeout=30)
    try:
        futures[name].result(timeout=30)
    except Exception as exc:  # already there from an earlier run
        if "TOPIC_ALREADY_EXISTS" not in str(exc):
            raise


def running_in_marquez(settings, job: str) -> set[str]:
    return {r["id"] for r in marquez_runs(settings, job) if r["state"] == "RUNNING"}


def cancel_and_see_its_run_end(settings, jid: str, job: str) -> None:
    """Cancel a Flink job and wait until Marquez shows its run ended (the Flink job sensor closes it): an end event
    arriving after the next job's start would put the cancelled job's outputs back on the job's current version."""
    open_runs = running_in_marquez(settings, job)
    cancel(settings, jid)
    wait_for(
        f"Marquez showing the run of cancelled {job} ended", lambda: not running_in_marquez(settings, job) & open_runs
    )


def with_sink_topic(args: list[str], topic: str) -> list[str]:
    out = list(args)
    if "--sink-topic" in out:
        out[out.index("--sink-topic") + 1] = topic
    else:
        out += ["--sink-topic", topic]
    return out


def test_supplier_stats_restarted_with_another_sink_topic_shows_in_marquez_the_check_and_verify(
    settings, flink_jobs_run, kafka_ns
):
    shadow, declared = f"{kafka_ns}/supplier-stats-shadow", f"{kafka_ns}/supplier-stats"
    dead_letters = f"{kafka_ns}/orders-dlq-supplier-stats"
    ensure_topic(settings, "supplier-stats-shadow")
    wait_for(
        "Marquez showing supplier-stats as declared, before the change",
        lambda: writes(settings) == {declared, dead_letters},
    )
    original = running_jid(settings, "supplier-stats")
    assert original, "supplier-stats runs (flink_jobs_run), or the test before put it back"
    args = job_args(settings, original)
    # the checkpoint the original job resumes from afterwards: what the shadow job writes is written again
    # into supplier-stats then, so the hop still balances. A job just deployed (flink_jobs_run, or the module
    # before) may not have completed one yet: its first is waited for in Flink's REST API before the cancel.
    wait_for(f"a completed checkpoint of supplier-stats {original}", lambda: completed_checkpoint(settings, original))
    cancel_and_see_its_run_end(settings, original, "supplier-stats")
    checkpoint = flink(settings, "GET", f"/jobs/{original}/checkpoints")["latest"]["completed"]["external_path"]
    shadow_jid = restart_with_flink_cli(settings, original, checkpoint, with_sink_topic(args, "supplier-stats-shadow"))
    try:
        wait_for(
            "Marquez showing supplier-stats writing the shadow topic",
            lambda: shadow in io_of(settings, "supplier-stats")[1],
        )
        inputs, outputs = io_of(settings, "supplier-stats")
        assert outputs == {shadow, dead_letters} and inputs == {f"{kafka_ns}/orders"}

        evaluation = engine_check(settings, "kafka_supplier_stats")
        assert not evaluation.passed
        assert f"supplier-stats writes {shadow}; declared {declared}" in (evaluation.description or "")

        verified = verify(settings)
        assert verified.returncode == 1, verified.stdout[-3000:] + verified.stderr[-2000:]
        assert f"supplier-stats writes {shadow}; declared {declared}" in verified.stdout
    finally:
        cancel_and_see_its_run_end(settings, shadow_jid, "supplier-stats")
        restart_with_flink_cli(settings, original, checkpoint, args)
    wait_for(
        "Marquez showing supplier-stats writing its declared topic again",
        lambda: declared in io_of(settings, "supplier-stats")[1],
    )
    assert io_of(settings, "supplier-stats")[1] == {declared, dead_letters}
    assert engine_check(settings, "kafka_supplier_stats").passed


def test_a_connector_reading_a_second_topic_shows_in_marquez_and_the_check(settings, flink_jobs_run, kafka_ns):
    connect = settings.connect_url
    ensure_topic(settings, "orders-audit")
    config = requests.get(f"{connect}/connectors/orders-s3-sink/config", timeout=10).json()
    wider = {**config, "topics": "orders,orders-audit"}
    second = f"{kafka_ns}/orders-audit"
    orders = {f"{kafka_ns}/orders"}
    wait_for("Marquez showing orders-s3-sink as declared, before the change", lambda: sink_reads(settings) == orders)
    assert requests.put(f"{connect}/connectors/orders-s3-sink/config", json=wider, timeout=30).status_code == 200
    try:
        wait_for(
            "Marquez showing orders-s3-sink reading orders-audit",
            lambda: second in io_of(settings, "orders-s3-sink")[0],
        )
        inputs, outputs = io_of(settings, "orders-s3-sink")
        assert inputs == {f"{kafka_ns}/orders", second}
        assert "s3://orders-archive/topics/orders-audit" in outputs

        evaluation = engine_check(settings, "archive_orders")
        assert not evaluation.passed
        assert f"orders-s3-sink reads {second}; not declared" in (evaluation.description or "")
    finally:
        restored = requests.put(f"{connect}/connectors/orders-s3-sink/config", json=config, timeout=30)
        assert restored.status_code == 200, restored.text
    wait_for(
        "Marquez showing orders-s3-sink reading orders alone again",
        lambda: io_of(settings, "orders-s3-sink")[0] == {f"{kafka_ns}/orders"},
    )
    assert engine_check(settings, "archive_orders").passed


#: the copy's SQL changes: item computed from another column, a cast added to price
CHANGED_SELECT = (
    "SELECT order_id, UPPER(supplier), CAST(CAST(price AS DOUBLE) AS DECIMAL(10, 2)), supplier, "
    "CAST(bid_time AS TIMESTAMP(6)), currency"
)
COPY_TABLE = "default.orders_plan_copy"


def changed_copy(tmp_path) -> str:
    """The Table API job's driver with its INSERT's SELECT changed, as an engineer would edit a copy of it."""
    source = (REPO_ROOT / "flink_jobs" / "iceberg_ingestion_job.py").read_text()
    original = "SELECT order_id, item, price, supplier, CAST(bid_time AS TIMESTAMP(6)), currency"
    assert original in source, "the job's INSERT changed: update this test's edit"
    copy = tmp_path / "iceberg_ingestion_job.py"
    copy.write_text(source.replace(original, CHANGED_SELECT))
    return str(copy)


def column_lineage(settings, namespace: str, name: str) -> dict[str, dict]:
    """Marquez's column lineage of a dataset: column -> its entry (inputFields, transformationDescription)."""
    url = f"{settings.marquez_url}/api/v1/namespaces/{quote(namespace, safe='')}/datasets/{quote(name, safe='')}"
    resp = requests.get(url, timeout=10)
    if resp.status_code != 200:
        return {}
    return {c["name"]: c for c in resp.json().get("columnLineage") or []}


def sources(entry: dict) -> set[tuple[str, str, str]]:
    return {(f["namespace"], f["dataset"], f["field"]) for f in entry.get("inputFields") or []}


def replaced(args: list[str], values: dict[str, str]) -> list[str]:
    out = list(args)
    for flag, value in values.items():
        if flag in out:
            out[out.index(flag) + 1] = value
        else:
            out += [flag, value]
    return out


def submit_script(settings, stopped: str, script: str, args: list[str], savepoint: str | None) -> str:
    """Submit ``script`` with Flink's CLI as the project does (the order functions, the shared modules), with the
    version the stopped job carried; returns the new Flink job id."""
    user = flink(settings, "GET", f"/jobs/{stopped}/config")["execution-config"]["user-config"]
    jobs_dir = REPO_ROOT / "flink_jobs"
    restore = ["-s", savepoint, "-n"] if savepoint else []
    resources = build_resources(settings)
    result = flink_cli(
        settings,
        "run",
        "-d",
        "-j",
        str(order_functions_jar(settings)),
        *restore,
        "-pyfs",
        f"{jobs_dir / 'connections.py'},{jobs_dir / 'deployment.py'}",
        "-py",
        script,
        *args,
        "--version",
        user["lineage-lab.version"],
        env=job_environment(resources["kafka"], resources["iceberg"]),  # the object store's keys, as a deploy gives
    )
    assert "Job has been submitted with JobID" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout.split("Job has been submitted with JobID ", 1)[1].split()[0]


def test_the_column_lineage_in_marquez_follows_a_changed_plan(settings, flink_jobs_run, kafka_ns, tmp_path):
    from pyiceberg.exceptions import NoSuchTableError

    catalog = build_resources(settings)["iceberg"].catalog()
    orders = catalog.load_table("default.orders")
    with contextlib.suppress(NoSuchTableError):  # left by an interrupted run
        catalog.drop_table(COPY_TABLE)
    catalog.create_table(COPY_TABLE, schema=orders.schema())
    ensure_topic(settings, "orders-dlq-flink-copy")
    original = running_jid(settings, "iceberg-ingestion")
    assert original, "iceberg-ingestion runs (flink_jobs_run), or the test before put it back"
    args = job_args(settings, original)
    trigger = flink(settings, "POST", f"/jobs/{original}/stop", json={"drain": False})["request-id"]

    def savepoint():
        status = flink(settings, "GET", f"/jobs/{original}/savepoints/{trigger}")
        return status["operation"]["location"] if status["status"]["id"] == "COMPLETED" else None

    saved = wait_for("iceberg-ingestion's savepoint", savepoint)
    copy_args = replaced(
        args, {"--table": COPY_TABLE, "--group-id": "plan-copy", "--dlq-topic": "orders-dlq-flink-copy"}
    )
    copy = submit_script(settings, original, changed_copy(tmp_path), copy_args, None)
    catalog_ns = settings.iceberg_catalog_url
    try:
        columns = wait_for(
            "Marquez holding the copy's column lineage",
            lambda: (c := column_lineage(settings, catalog_ns, "default.orders_plan_copy")).get("item") and c,
        )
        orders = (kafka_ns, "orders")
        assert sources(columns["item"]) == {(*orders, "supplier")}, "item is computed from supplier now"
        assert "UPPER" in columns["item"]["transformationDescription"]
        assert sources(columns["price"]) == {(*orders, "price")}
        assert "CAST" in columns["price"]["transformationDescription"], "the cast added to price"
        assert sources(columns["order_id"]) == {(*orders, "order_id")}
    finally:
        cancel(settings, copy)
        submit_script(settings, original, str(REPO_ROOT / "flink_jobs" / "iceberg_ingestion_job.py"), args, saved)
        catalog.drop_table(COPY_TABLE)
