"""The declaration as the expectation: each job's lineage as its engine accounts for it now, held to what the
identity module declares.

One check, ``lineage_engine_matches_declaration``, on the asset of each job's output: Flink (the listener's START
and the compiled plan in the job's configuration), Kafka Connect (the connector's live configuration) and Spark
(its OpenLineage listener's events, as Marquez holds them: no other producer writes that job). It fails naming
every dataset and column where the engine and the declaration part, and says ``unknown`` (a warning, with the
endpoint and what to do) when the engine's account cannot be read: it never compares the declaration with itself.
``lineage-lab verify`` reports the same (``engine_section``).
"""

from collections.abc import Callable

import dagster as dg

from lineage_assets.checks.graph import LineageGraph
from lineage_assets.checks.marquez_graph import from_marquez
from lineage_assets.connect.client import ConnectClient, ConnectError
from lineage_assets.connect.connector_lineage import cluster_topics, connector_account, connector_reader
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.flink.client import FlinkClient, FlinkError
from lineage_assets.flink.job_lineage import read_account
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.kafka.connection import KafkaConnection
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.kafka.topics import KafkaUnavailable
from lineage_assets.lineage.account import (
    OBSERVED,
    Account,
    ColumnAccount,
    DatasetName,
    SourceField,
    Unknown,
    declared_account,
    differences,
)
from lineage_assets.lineage.identity import Dataset, Job, Pipeline
from lineage_assets.lineage.marquez_client import MarquezError
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key

CHECK = "lineage_engine_matches_declaration"
ENGINES = ("FLINK", "KAFKA_CONNECT", "SPARK")

#: a job's account, asked of its engine now
AccountReader = Callable[[Job], Account | Unknown]


def checked_jobs(pipeline: Pipeline) -> dict[str, Dataset]:
    """Each job an engine runs, with the dataset whose asset carries its check (the job's output)."""
    return {job.name: pipeline.output(job.name) for job in pipeline.jobs.values() if job.integration in ENGINES}


def flink_reader(pipeline: Pipeline, client: FlinkClient) -> AccountReader:
    def read(job: Job) -> Account | Unknown:
        try:
            running = client.active(job.name)
        except FlinkError as exc:
            return Unknown(
                job.name, f"Flink at {client.url} did not answer ({exc}); is it up (`lineage-lab stack status`)?"
            )
        if running is None:
            return Unknown(
                job.name,
                f"no Flink job named {job.name} runs on {client.url}: nothing to account for; materialize its asset",
            )
        return read_account(client, pipeline, job.name, running.jid)

    return read


def connect_reader(pipeline: Pipeline, client: ConnectClient, kafka: KafkaConnection) -> AccountReader:
    def read(job: Job) -> Account | Unknown:
        try:
            config = client.config(job.name)
        except ConnectError as exc:
            return Unknown(job.name, str(exc))

        try:
            return connector_account(
                pipeline,
                job.name,
                config,
                bootstrap=kafka.bootstrap,
                list_topics=cluster_topics(kafka),
                reader=connector_reader(client.url, job.name),
            )
        except KafkaUnavailable as exc:
            return Unknown(job.name, f"the topics of {job.name}'s topics.regex cannot be listed: {exc}")

    return read


def spark_reader(pipeline: Pipeline, graph: LineageGraph | MarquezError, marquez_url: str) -> AccountReader:
    """A Spark job's account: its listener's last events as Marquez holds them (only that listener writes the
    job; the project forwards its events unchanged but for the job's name)."""

    def read(job: Job) -> Account | Unknown:
        if isinstance(graph, MarquezError):
            return Unknown(job.name, f"Marquez at {marquez_url} cannot be read: {graph}")
        node = graph.jobs.get((job.namespace, job.name))
        inputs, outputs = graph.io_with_children(node.identity) if node is not None else (set(), set())
        if not outputs:
            why = f"Marquez at {marquez_url} holds no run of {job.name} with datasets yet: materialize its asset"
            return Unknown(job.name, why)
        columns: dict[DatasetName, dict[str, ColumnAccount]] = {}
        for identity in sorted(outputs):
            out = graph.datasets.get(identity)
            for column, sources in (out.column_sources if out else {}).items():
                fields = tuple(SourceField(DatasetName(*src), src_column) for src, src_column in sorted(sources))
                columns.setdefault(DatasetName(*identity), {})[column] = ColumnAccount(fields, OBSERVED)
        return Account(
            job.name,
            f"the OpenLineage Spark listener's events of {job.name}, as Marquez at {marquez_url} holds them",
            tuple(DatasetName(*i) for i in sorted(inputs)),
            tuple(DatasetName(*o) for o in sorted(outputs)),
            columns,
        )

    return read


def judge(pipeline: Pipeline, job: Job, account: Account | Unknown) -> tuple[bool | None, str, list[str]]:
    """(True: agrees, False: differs, None: unknown; the sentence; the differences)."""
    if isinstance(account, Unknown):
        return None, f"unknown: {account.reason}", []
    found = differences(account, declared_account(pipeline, job.name))
    if found:
        return False, "; ".join(found), found
    return True, f"{job.name}: the engine's account agrees with the declaration ({account.reader})", []


def result_for(pipeline: Pipeline, job: Job, account: Account | Unknown) -> dg.AssetCheckResult:
    agrees, sentence, found = judge(pipeline, job, account)
    metadata: dict[str, object] = {"state": {True: "agrees", False: "differs", None: "unknown"}[agrees]}
    if isinstance(account, Account):
        metadata |= {
            "reader": account.reader,
            "observed/inputs": dg.MetadataValue.json([str(d) for d in account.inputs]),
            "observed/outputs": dg.MetadataValue.json([str(d) for d in account.outputs]),
            "columns": dg.MetadataValue.json(
                {str(out): account.column_origins(out) for out in account.outputs if account.columns.get(out)}
            ),
        }
    if found:
        metadata["differences"] = dg.MetadataValue.md("\n".join(f"- {d}" for d in found))
    return dg.AssetCheckResult(
        asset_key=asset_key(pipeline.output(job.name)),
        check_name=CHECK,
        passed=bool(agrees),
        severity=dg.AssetCheckSeverity.WARN if agrees is None else dg.AssetCheckSeverity.ERROR,
        description=sentence,
        metadata=metadata,
    )


def readers(
    pipeline: Pipeline,
    flink: FlinkClient | None,
    connect: ConnectClient | None,
    kafka: KafkaConnection | None,
    graph: Callable[[], tuple[LineageGraph | MarquezError, str]] | None,
) -> AccountReader:
    """One reader for every engine: each asks its own engine, and says unknown when it has no client."""

    def read(job: Job) -> Account | Unknown:
        if job.integration == "FLINK" and flink is not None:
            return flink_reader(pipeline, flink)(job)
        if job.integration == "KAFKA_CONNECT" and connect is not None and kafka is not None:
            return connect_reader(pipeline, connect, kafka)(job)
        if job.integration == "SPARK" and graph is not None:
            return spark_reader(pipeline, *graph())(job)
        return Unknown(job.name, f"no client of its engine ({job.integration}) was given to ask")

    return read


def build_engine_lineage_check(pipeline: Pipeline) -> list[dg.AssetChecksDefinition]:
    """One subsettable check step for every job's output asset: asks each selected job's engine once."""
    jobs = checked_jobs(pipeline)
    keys = {asset_key(ds): name for name, ds in jobs.items()}

    @dg.multi_asset_check(
        specs=[
            dg.AssetCheckSpec(
                CHECK,
                asset=key,
                description=f"what {name} reads and writes, down to the columns, as its engine says now, equals the "
                "declaration (unknown when the engine's account cannot be read)",
            )
            for key, name in keys.items()
        ],
        name="engine_lineage_checks",
        can_subset=True,
    )
    def engine_lineage_checks(
        context: dg.AssetCheckExecutionContext,
        flink: FlinkResource,
        connect: ConnectResource,
        kafka: KafkaResource,
        lineage: LineageResource,
    ):
        selected = {k.asset_key for k in context.selected_asset_check_keys}
        marquez = lineage.marquez()
        cached: list[tuple[LineageGraph | MarquezError, str]] = []

        def graph() -> tuple[LineageGraph | MarquezError, str]:
            if not cached:
                try:
                    cached.append((from_marquez(marquez, pipeline), marquez.url))
                except MarquezError as exc:
                    cached.append((exc, marquez.url))
            return cached[0]

        read = readers(pipeline, flink.client(), connect.client(), kafka.connection(), graph)
        for key, name in keys.items():
            if key in selected:
                job = pipeline.job(name)
                yield result_for(pipeline, job, read(job))

    return [engine_lineage_checks]
