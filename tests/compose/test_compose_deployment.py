"""The Compose deployment as it runs: every service healthy, only UIs and APIs published (on 127.0.0.1), each run of
the main job executed by DockerRunLauncher in a container of its own, run records in PostgreSQL surviving a restart
of the Dagster containers, every asset check passing, and the same lineage graph as the embedded stack."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import dagster as dg
import docker
import pytest
import requests
import yaml

from infra.settings import REPO_ROOT, StackSettings
from lineage_assets.checks.keyed_graph import differences, keyed_graph
from lineage_assets.checks.marquez_graph import from_marquez
from lineage_assets.jobs import CHECKS_JOB, DEPLOY_JOB
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.marquez_client import MarquezClient

COMPOSE_FILE = REPO_ROOT / "infra" / "compose" / "docker-compose.yml"
PROJECT = "lineage-lab"
MAIN_JOBS = (DEPLOY_JOB, "generate_orders_job", CHECKS_JOB)
DAGSTER_CONTAINERS = ("dagster-webserver", "dagster-daemon", "dagster-user-code")
PUBLISHED = {"marquez", "marquez-web", "flink-jobmanager", "dagster-webserver"}
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")
RUNS_QUERY = "{ runsOrError(limit: 1000) { ... on Runs { results { runId status jobName } } } }"


@pytest.fixture(scope="module")
def client() -> docker.DockerClient:
    return docker.from_env()


@pytest.fixture(scope="module")
def services(client) -> dict[str, docker.models.containers.Container]:
    """The deployment's long-running containers by Compose service name (one-off containers left out)."""
    found = client.containers.list(all=True, filters={"label": f"com.docker.compose.project={PROJECT}"})
    return {
        c.labels["com.docker.compose.service"]: c
        for c in found
        if c.labels.get("com.docker.compose.oneoff", "False") != "True"
    }


@pytest.fixture(scope="module")
def instance() -> dg.DagsterInstance:
    return dg.DagsterInstance.get()


def declared_services() -> dict[str, dict]:
    spec = yaml.safe_load(COMPOSE_FILE.read_text())["services"]
    return {name: svc for name, svc in spec.items() if not svc.get("profiles")}


def graphql_runs(settings: StackSettings) -> dict[str, str]:
    resp = requests.post(f"{settings.dagster_url}/graphql", json={"query": RUNS_QUERY}, timeout=30)
    resp.raise_for_status()
    return {r["runId"]: r["status"] for r in resp.json()["data"]["runsOrError"]["results"]}


def test_every_declared_service_runs_and_is_healthy(services):
    declared = declared_services()
    assert set(services) == set(declared), "the running containers are not the Compose file's services"
    for name, container in services.items():
        container.reload()
        assert container.status == "running", f"{name} is {container.status}"
        health = container.attrs["State"].get("Health")
        if "healthcheck" in declared[name]:
            assert health and health["Status"] == "healthy", f"{name}: {health}"


def test_only_the_uis_and_apis_are_published_and_only_on_loopback(services):
    for name, container in services.items():
        bindings = [b for bs in (container.attrs["HostConfig"]["PortBindings"] or {}).values() for b in bs or []]
        if name in PUBLISHED:
            assert bindings, f"{name} publishes no port"
        else:
            assert not bindings, f"{name} publishes {bindings}; only {sorted(PUBLISHED)} may"
        assert all(b["HostIp"] == "127.0.0.1" for b in bindings), f"{name} binds beyond loopback: {bindings}"


def test_each_run_of_the_main_job_ran_in_a_container_of_its_own(client, instance, services):
    """Every run that started ran in a container of its own, and no run failed before it could start. The daemon
    keeps launching runs (sensors, schedules) while this reads, so the runs are read before the containers: a run
    that had started by then had its container created before it (the run process inside reports the start), and a
    run still being launched (STARTING, no start time yet) is judged by neither rule."""
    code_server_env = dict(e.split("=", 1) for e in services["dagster-user-code"].attrs["Config"]["Env"])
    image = code_server_env["DAGSTER_CURRENT_IMAGE"]
    records = instance.get_run_records()
    containers = client.containers.list(all=True, filters={"label": "dagster/run_id"})
    by_run = {c.labels["dagster/run_id"]: c for c in containers}
    assert len(by_run) == len(containers), "two containers carry the same run id"
    runs = [r.dagster_run for r in records]
    for job in MAIN_JOBS:
        done = [r for r in runs if r.job_name == job and r.status == dg.DagsterRunStatus.SUCCESS]
        assert done, f"no successful run of {job} in Dagster's run storage"
        run = done[0]
        container = by_run.get(run.run_id)
        assert container is not None, f"run {run.run_id} of {job} has no container labelled with its run id"
        assert container.labels["dagster/job_name"] == job
        assert container.attrs["Config"]["Image"] == image, "not started from the user-code server's image"
        assert container.attrs["State"]["ExitCode"] == 0
    # every run Dagster started (sensor runs of supplier_stats included) went through DockerRunLauncher
    started = {r.dagster_run.run_id for r in records if r.start_time is not None}
    assert started <= set(by_run), f"runs that started without a container: {sorted(started - set(by_run))}"
    # a launch that failed (the run failed before its process started) is named with what the launcher said
    failed_at_launch = {
        r.dagster_run.run_id: [e.message for e in instance.all_logs(r.dagster_run.run_id) if e.message][-3:]
        for r in records
        if r.start_time is None and r.dagster_run.status == dg.DagsterRunStatus.FAILURE
    }
    assert not failed_at_launch, f"runs that failed to launch, with their last events: {failed_at_launch}"


def test_every_asset_check_passed_in_the_main_job(instance):
    from lineage_assets.definitions import build_definitions

    defs = build_definitions(StackSettings.from_env())
    run = instance.get_runs(filters=dg.RunsFilter(job_name=CHECKS_JOB, statuses=[dg.DagsterRunStatus.SUCCESS]))[0]
    records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    evaluations = [r.event_log_entry.dagster_event.event_specific_data for r in records]
    declared = defs.resolve_asset_graph().asset_check_keys
    assert {e.asset_check_key for e in evaluations} == set(declared)
    failed = [f"{e.asset_key.to_user_string()} {e.check_name}: {e.description}" for e in evaluations if not e.passed]
    assert not failed


def test_the_lineage_graph_is_the_embedded_stacks(settings):
    """Compared by the identity module's keys: the two deployments name the same datasets in other namespaces."""
    pipeline = Pipeline.from_settings(settings)
    graph = keyed_graph(pipeline, from_marquez(MarquezClient(settings.marquez_url), pipeline))
    assert set(graph["datasets"]) == {
        "source_orders",
        "kafka_orders",
        "archive_orders",
        "kafka_supplier_stats",
        "iceberg_orders",
        "iceberg_supplier_stats",
        "dlq_orders_s3_sink",
        "dlq_iceberg_ingestion",
        "dlq_supplier_stats",
    }, "datasets of the pipeline missing from Marquez"
    assert set(graph["jobs"]) == {
        "orders-source",
        "orders-s3-sink",
        "supplier-stats",
        "iceberg-ingestion",
        "dagster",
        "dagster.supplier_stats",
    }, "jobs of the pipeline missing from Marquez"
    embedded = os.environ.get("LINEAGE_LAB_EMBEDDED_GRAPH")
    if not embedded:
        pytest.skip("no embedded graph to compare with: LINEAGE_LAB_EMBEDDED_GRAPH (`lineage-lab lineage graph`)")
    assert differences(json.loads(Path(embedded).read_text()), graph) == []


def not_back_since(services, instance: dg.DagsterInstance, since: float) -> list[str]:
    """What of Dagster is not back since a restart at ``since``: a container whose declared health check does not
    say healthy yet, and a daemon the instance requires that has not beaten since (the daemon's container declares no
    health check: its heartbeats in the run storage are how Dagster itself tells it is alive)."""
    declared = declared_services()
    missing = []
    for name in DAGSTER_CONTAINERS:
        if "healthcheck" not in declared[name]:
            continue
        services[name].reload()
        status = services[name].attrs["State"].get("Health", {}).get("Status")
        if status != "healthy":
            missing.append(f"{name}: {status}")
    beats = instance.get_daemon_heartbeats()
    for daemon in instance.get_required_daemon_types():
        beat = beats.get(daemon)
        if beat is None or beat.timestamp <= since:
            missing.append(f"{daemon} daemon: no heartbeat since the restart")
    return missing


def test_run_records_survive_a_restart_of_the_dagster_containers(services, settings, instance):
    before = graphql_runs(settings)
    assert before, "the webserver lists no runs before the restart"
    restarted_at = time.time()
    for name in DAGSTER_CONTAINERS:
        services[name].restart(timeout=30)
    # wait for Dagster to say it is back (health checks and heartbeats only move forward from the restart), then judge
    deadline = time.monotonic() + 240
    while not_back_since(services, instance, restarted_at) and time.monotonic() < deadline:
        time.sleep(3)
    assert not_back_since(services, instance, restarted_at) == [], "Dagster not back within 4 min of the restart"
    after = graphql_runs(settings)
    assert set(before) <= set(after), f"runs lost: {sorted(set(before) - set(after))}"
    finished = {run: status for run, status in before.items() if status in FINISHED}
    assert finished == {run: after[run] for run in finished}
