"""docs/extending.md recipes 1 and 2 followed on the running stack with a throwaway Flink copy: iceberg-ingestion's
own script deployed a second time under another name, into a table, consumer group and dead-letter topic of its own.
Its dataset, dead letters and job are declared in memory as the identity module declares its own (kind ``copy``, its
dead letters named on the job), and nothing else is written: no reader, no rule, no consumer group entry (the reader
takes the group from the running deployment). ``reconcile`` must then balance the hop, and its figures must equal
what the test's own readers find at the hop's cut: the table's rows scanned at the cut's snapshot (data files read,
not the summary), read-committed consumers of ``orders`` and of the dead letters. Everything the job made is deleted
at the end."""

from __future__ import annotations

import contextlib
import dataclasses
import json

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient

from lineage_assets.checks.conservation import checked_hops
from lineage_assets.conservation.reconcile import reconcile
from lineage_assets.conservation.stores import Stores
from lineage_assets.flink.deploy import (
    SHARED_MODULES,
    ensure_dead_letter_topic,
    job_environment,
    order_rule_args,
    submit,
)
from lineage_assets.flink.iceberg_ingestion_asset import SPEC, job_args
from lineage_assets.flink.runs_once import runs_once_result
from lineage_assets.flink.tables import ensure_orders_table
from lineage_assets.kafka.topics import TopicSpec
from lineage_assets.lineage import naming
from lineage_assets.lineage.identity import DEAD_LETTER_RETENTION_MS, Pipeline, Symlink
from lineage_assets.tunables import PipelineTunables
from tests.service.lineage_assets.conservation.conftest import (
    committed_past,
    judge_consumer,
    order_records,
    orders_below,
    private_stores,
)
from tests.support.engine_waits import wait_for
from tests.support.outside_flink import cancel, flink
from tests.support.outside_flink import job_args as recorded_args

pytestmark = pytest.mark.service

NAME = "iceberg-ingestion-throwaway"
GROUP = NAME
DLQ = "orders-dlq-flink-throwaway"
TABLE = "default.orders_throwaway"
#: the job states Flink's REST API documents for a job that is not finished, written out by hand
NOT_FINISHED = ("CREATED", "INITIALIZING", "RUNNING", "RESTARTING", "RECONCILING")


def with_throwaway(settings, base: Pipeline) -> Pipeline:
    """Recipe 1, steps 1-2 (recipe 2, step 1): the copy's table, its dead letters and its job, declared by hand
    from iceberg-ingestion's own declarations with the names changed."""
    table, dlq = base.dataset("iceberg_orders"), base.dataset("dlq_iceberg_ingestion")
    job = base.job("iceberg-ingestion")
    copy_ns, copy_name = naming.iceberg_table(f"{settings.warehouse_uri}default/orders_throwaway")
    dead_ns, dead_name = naming.kafka(settings.kafka_bootstrap, DLQ)
    copy = dataclasses.replace(
        table,
        key="iceberg_orders_throwaway",
        namespace=copy_ns,
        name=copy_name,
        asset_key=("iceberg", "default", "orders_throwaway"),
        producer=NAME,
        description=f"A throwaway second Iceberg copy of orders, {TABLE}",
        symlinks=(Symlink(settings.iceberg_catalog_url, TABLE),),
    )
    dead = dataclasses.replace(
        dlq,
        key="dlq_iceberg_ingestion_throwaway",
        namespace=dead_ns,
        name=dead_name,
        asset_key=("kafka", "dead_letters", "orders_dlq_flink_throwaway"),
        producer=NAME,
    )
    copy_job = dataclasses.replace(
        job,
        name=NAME,
        outputs=(copy.key, dead.key),
        column_lineage={copy.key: job.column_lineage["iceberg_orders"]},
        description=f"Flink Table API: a throwaway copy of orders into {TABLE}",
        dead_letters=dead.key,
    )
    return Pipeline({**base.datasets, copy.key: copy, dead.key: dead}, {**base.jobs, NAME: copy_job})


@pytest.fixture(scope="module")
def pipeline(settings) -> Pipeline:
    return with_throwaway(settings, Pipeline.from_settings(settings))


@pytest.fixture(scope="module")
def throwaway_stores(settings, pipeline, tmp_path_factory) -> Stores:
    return private_stores(settings, pipeline, tmp_path_factory.mktemp("counts"))


@pytest.fixture(scope="module")
def deployed(settings, pipeline, throwaway_stores):
    """Recipe 2's deployment, by hand: the table and the dead-letter topic made, the job's script submitted with the
    copy's names (``job_args``: what the asset passes, the names changed); each thing made is undone at the end,
    the job first, also when a later step (the submit itself) fails."""
    resources = throwaway_stores.resources
    kafka, iceberg, client = resources.kafka, resources.iceberg, throwaway_stores.flink
    admin = AdminClient({"bootstrap.servers": settings.kafka_bootstrap})
    with contextlib.ExitStack() as undo:
        ensure_orders_table(iceberg.catalog(), TABLE, pipeline.dataset("iceberg_orders_throwaway"))
        undo.callback(lambda: iceberg.catalog().purge_table(TABLE))
        spec = TopicSpec(DLQ, partitions=1, retention_ms=DEAD_LETTER_RETENTION_MS)
        dead_letter_args = ensure_dead_letter_topic(kafka.connection(), "orders", spec)
        undo.callback(lambda: settled(admin.delete_topics([DLQ], operation_timeout=15)))
        # the group exists once the job committed: a submit that failed leaves none to delete
        undo.callback(lambda: settled(admin.delete_consumer_groups([GROUP], request_timeout=15), "GROUP_ID_NOT_FOUND"))
        args = [
            *job_args(kafka, iceberg, TABLE, "2 s", job_name=NAME, group=GROUP, dlq_topic=DLQ),
            *order_rule_args(PipelineTunables.from_settings(settings)),
            *dead_letter_args,
        ]
        job = submit(client, SPEC, args, SPEC.version("throwaway"), None, job_environment(kafka, iceberg))
        undo.callback(cancelled, client, job)
        wait_for(f"Flink job {NAME} RUNNING", lambda: (client.current(NAME) or job).state == "RUNNING", deadline=180)
        yield job


def cancelled(client, job) -> None:
    client.cancel(job.jid)
    wait_for(f"Flink job {NAME} cancelled", lambda: (client.job(job.jid) or job).state == "CANCELED")


def settled(futures: dict, absent: str | None = None) -> None:
    """Wait for each of an admin call's futures; an error naming ``absent`` means there was nothing to delete."""
    for future in futures.values():
        try:
            future.result(timeout=30)
        except Exception as exc:
            if absent is None or absent not in str(exc):
                raise


def table_rows_at(iceberg, snapshot_id: int) -> int:
    """Rows of the copy's table at ``snapshot_id``, its data files scanned by pyiceberg (not the snapshot summary
    the reader takes its count from)."""
    return iceberg.catalog().load_table(TABLE).scan(snapshot_id=snapshot_id).to_arrow().num_rows


def dead_letters_below(settings, cut: dict[int, int]) -> int:
    """Distinct records of ``orders`` below ``cut`` that the copy's dead-letter topic holds (their JSON names the
    source partition and offset)."""
    consumer = judge_consumer(settings)
    sources: set[tuple[int, int]] = set()
    try:
        open_partitions = set(consumer.list_topics(DLQ, timeout=10).topics[DLQ].partitions)
        consumer.assign([TopicPartition(DLQ, p, 0) for p in open_partitions])
        while open_partitions:
            msg = consumer.poll(10)
            assert msg is not None, f"{DLQ} did not answer"
            if msg.error() is not None:
                assert msg.error().code() == KafkaError._PARTITION_EOF, msg.error()
                open_partitions.discard(msg.partition())
                continue
            body = json.loads(msg.value())
            p, o = int(body["src_partition"]), int(body["src_offset"])
            if body["src_topic"] == "orders" and o < cut[p]:
                sources.add((p, o))
    finally:
        consumer.close()
    return len(sources)


def test_a_flink_copy_declared_by_the_recipe_alone_is_reconciled(settings, pipeline, throwaway_stores, deployed):
    assert NAME in [h.job.name for h in checked_hops(pipeline)], "the declared copy gets no conservation check"
    _, after_last = order_records(settings, {p: 0 for p in throwaway_stores.kafka.offsets("orders")})
    wait_for(
        f"group {GROUP} committed past the last record of orders as of the deploy",
        lambda: not committed_past(settings, GROUP, after_last),
        deadline=300,
    )
    (found,) = reconcile(throwaway_stores, jobs=[NAME], confirm_after_s=0)
    assert found.job == NAME and found.status in ("balanced", "pending"), found.summary()
    assert found.range["group"] == GROUP, found.range
    cut, snapshot = found.range["committed offsets"], found.range["snapshot"]
    expected_in, rows = orders_below(settings, cut), table_rows_at(throwaway_stores.resources.iceberg, snapshot)
    assert found.other_writers == (), found.summary()
    assert found.out == rows > 0, (found.out, rows)
    assert found.dead_letters == dead_letters_below(settings, cut), found.summary()
    # the records below the group's committed offsets are in the table or dead-lettered; the rest is pending
    assert found.in_ - found.pending == expected_in == found.out + found.dead_letters, found.summary()
    (checksum,) = found.values
    assert not checksum.unknown and not checksum.differs, checksum.summary()


def active_jobs(settings) -> list[tuple[int, str]]:
    """(start time, job id) of every job named like the copy that Flink lists as not finished, oldest first."""
    jobs = flink(settings, "GET", "/jobs/overview")["jobs"]
    return sorted((j["start-time"], j["jid"]) for j in jobs if j["name"] == NAME and j["state"] in NOT_FINISHED)


def test_a_second_copy_started_by_hand_fails_runs_once_naming_both(settings, throwaway_stores, deployed):
    """An operator starts the copy's script a second time under the same name (Flink's CLI with the arguments the
    running job records: no deployment, so no lock and no cancel of the later job). ``flink_job_runs_once`` must
    fail naming both job ids Flink lists, the older one to keep; once the second is cancelled it passes."""
    client = throwaway_stores.flink
    resources = throwaway_stores.resources
    user = flink(settings, "GET", f"/jobs/{deployed.jid}/config")["execution-config"]["user-config"]
    second = client.submit_python(
        str(SPEC.script),
        *recorded_args(settings, deployed.jid),
        "--version",
        user["lineage-lab.version"],
        py_files=tuple(str(p) for p in SHARED_MODULES),
        env=job_environment(resources.kafka, resources.iceberg),
    )
    try:
        wait_for(f"Flink listing two active {NAME} jobs", lambda: len(active_jobs(settings)) == 2, deadline=180)
        (_, first), (_, later) = active_jobs(settings)
        assert {first, later} == {deployed.jid, second}
        result = runs_once_result(client, NAME)
        assert not result.passed and result.severity.value == "ERROR", result.description
        assert f"2 Flink jobs named {NAME} are active" in result.description, result.description
        assert f"Keep the first ({first})" in result.description and f"flink cancel {later}" in result.description
        assert result.metadata["active_jobs"].value == 2
    finally:
        cancel(settings, second)
    assert [jid for _, jid in active_jobs(settings)] == [deployed.jid]
    after = runs_once_result(client, NAME)
    assert after.passed and deployed.jid in after.description, after.description
