"""A Flink job's lineage as Flink accounts for it, whoever submitted the job.

Two engine sources, both read for one Flink job id:
- **Datasets**: the OpenLineage Flink listener's START for the job (its file transport on this host: the listener
  runs in the submitting client, see infra/services/flink.py). It names each Kafka topic the plan reads or writes;
  a catalog table (Flink's Iceberg sink has no lineage vertex yet) comes as ``<catalog>.<db>.<table>`` with no
  namespace, and is named here after the catalog the job's plan declares (``catalog URI``, ``db.table``: the
  table's symlink identity, which the identity module spells as the table's location when it declares it).
- **Columns** (Table API jobs): the job's compiled plan, read by the order-functions module's ``PlanLineage`` in the
  job's driver and carried in the job's own configuration (global job parameter ``lineage-lab.lineage``, readable
  over REST): per sink column, the source columns the optimized plan computes it from and how. A column decoded by
  a table function that says which field of its input it is (``decode_order``) comes from that field of the topic's
  value. Without a plan (a DataStream job) the declared column lineage stays, marked ``declared``.

Where the listener has no event for the job (a client without the listener), the plan's own sources and sinks name
the datasets; with neither, the account is ``Unknown``, saying what was read and what to do.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from flink_jobs.deployment import LINEAGE, LINEAGE_ERROR, decode_json
from lineage_assets.flink.client import FlinkClient, FlinkError
from lineage_assets.lineage import naming
from lineage_assets.lineage.account import (
    OBSERVED,
    Account,
    ColumnAccount,
    DatasetName,
    SourceField,
    Unknown,
    with_declared_columns,
)
from lineage_assets.lineage.identity import Pipeline

_IDENTIFIER_PART = re.compile(r"`((?:[^`]|``)*)`|([^.`]+)")


def identifier_parts(identifier: str) -> list[str]:
    """```lakehouse`.`default`.`orders``` or ``lakehouse.default.orders`` -> [lakehouse, default, orders]."""
    return [(quoted.replace("``", "`") if quoted else bare) for quoted, bare in _IDENTIFIER_PART.findall(identifier)]


def spelled(pipeline: Pipeline, name: DatasetName) -> DatasetName:
    """The identity module's spelling of a dataset it declares under any of its names (a table's catalog name
    becomes its location); any other dataset keeps the engine's name."""
    ds = pipeline.by_identity(name.namespace, name.name)
    return DatasetName(ds.namespace, ds.name) if ds else name


class _Namer:
    """Names the datasets of one job's account: Kafka topics through ``naming.kafka``, catalog tables after the
    catalogs the job's plan declares."""

    def __init__(self, pipeline: Pipeline, catalogs: Mapping[str, Mapping[str, str]]) -> None:
        self.pipeline = pipeline
        self.catalogs = catalogs

    def listener_dataset(self, dataset: Mapping) -> DatasetName | str:
        """A dataset of a listener event, or why it cannot be named."""
        namespace, name = str(dataset.get("namespace") or ""), str(dataset.get("name") or "")
        if namespace.startswith("kafka://"):
            return spelled(self.pipeline, DatasetName(*naming.kafka(namespace.removeprefix("kafka://"), name)))
        if not namespace:
            return self.catalog_table(name)
        return spelled(self.pipeline, DatasetName(namespace, name))

    def catalog_table(self, identifier: str) -> DatasetName | str:
        parts = identifier_parts(identifier)
        if len(parts) != 3:
            return f"table {identifier!r} names no catalog"
        catalog = self.catalogs.get(parts[0])
        if not catalog or not catalog.get("uri"):
            return f"table {identifier!r} is in catalog {parts[0]!r}, which the job's plan does not describe"
        return spelled(self.pipeline, DatasetName(catalog["uri"].rstrip("/"), f"{parts[1]}.{parts[2]}"))

    def plan_table(self, table: str, options: Mapping[str, str]) -> DatasetName | str:
        """A table of the compiled plan: a Kafka table by its topic and brokers, a catalog table by its catalog."""
        if options.get("connector") == "kafka":
            if not options.get("topic") or not options.get("properties.bootstrap.servers"):
                return f"Kafka table {table} has no single topic and bootstrap servers in its options"
            return spelled(
                self.pipeline, DatasetName(*naming.kafka(options["properties.bootstrap.servers"], options["topic"]))
            )
        return self.catalog_table(table)


def _latest_start(events: Iterable[Mapping]) -> Mapping | None:
    starts = [e for e in events if e.get("eventType") == "START"]
    return starts[-1] if starts else None


def plan_of(user_config: Mapping[str, str]) -> tuple[dict | None, str | None]:
    """(the column lineage the job's driver read from its compiled plan, or why there is none)."""
    if LINEAGE_ERROR in user_config:
        return None, f"the job's driver could not read its plan: {decode_json(user_config[LINEAGE_ERROR])}"
    if LINEAGE not in user_config:
        return None, None
    plan = decode_json(user_config[LINEAGE])
    if not isinstance(plan, dict):
        return None, f"the job's {LINEAGE} parameter is not the JSON lineage-lab writes"
    return plan, None


def _plan_columns(plan: Mapping, namer: _Namer) -> tuple[dict[DatasetName, dict[str, ColumnAccount]], list[str]]:
    columns: dict[DatasetName, dict[str, ColumnAccount]] = {}
    problems = []
    for sink in plan.get("sinks", []):
        out = namer.plan_table(sink["table"], sink.get("options", {}))
        if isinstance(out, str):
            problems.append(out)
            continue
        for column, sources in sink.get("columns", {}).items():
            fields = []
            for src in sources:
                ds = namer.plan_table(src["table"], src.get("options", {}))
                if isinstance(ds, str):
                    problems.append(ds)
                    continue
                fields.append(
                    SourceField(
                        ds,
                        src.get("field") or src["column"],
                        src.get("type", "DIRECT"),
                        src.get("subtype", "IDENTITY"),
                        src.get("description") or "",
                    )
                )
            columns.setdefault(out, {})[column] = ColumnAccount(tuple(fields), OBSERVED)
    return columns, problems


def flink_account(
    pipeline: Pipeline,
    job: str,
    jid: str,
    listener_events: Iterable[Mapping],
    user_config: Mapping[str, str],
    listener_file: str,
    rest_url: str,
) -> Account | Unknown:
    """The account of Flink job ``jid`` (pipeline job ``job``) from its listener events and its configuration."""
    plan, plan_problem = plan_of(user_config)
    namer = _Namer(pipeline, (plan or {}).get("catalogs", {}))
    start = _latest_start(listener_events)
    read = []
    inputs: list[DatasetName] = []
    outputs: list[DatasetName] = []
    problems: list[str] = []
    if start is not None:
        read.append(f"the OpenLineage Flink listener's START in {listener_file}")
        for target, datasets in ((inputs, start.get("inputs", [])), (outputs, start.get("outputs", []))):
            for dataset in datasets:
                named = namer.listener_dataset(dataset)
                (problems.append(named) if isinstance(named, str) else target.append(named))
    elif plan is not None:
        read.append(f"the sources and sinks of its compiled plan ({LINEAGE} at {rest_url})")
        for source in plan.get("sources", []):
            named = namer.plan_table(source["table"], source.get("options", {}))
            (problems.append(named) if isinstance(named, str) else inputs.append(named))
        for sink in plan.get("sinks", []):
            named = namer.plan_table(sink["table"], sink.get("options", {}))
            (problems.append(named) if isinstance(named, str) else outputs.append(named))
    else:
        return Unknown(
            job,
            f"Flink job {jid} ({job}) at {rest_url}: the OpenLineage Flink listener's file {listener_file} has no "
            f"event for it and its configuration carries no {LINEAGE}"
            + (f" ({plan_problem})" if plan_problem else "")
            + ". Submit it with the project's Flink client configuration (the listener is in it), or materialize its "
            "asset to redeploy it",
        )
    columns: dict[DatasetName, dict[str, ColumnAccount]] = {}
    if plan is not None:
        read.append(f"the column lineage of its compiled plan ({LINEAGE} at {rest_url})")
        columns, column_problems = _plan_columns(plan, namer)
        problems += column_problems
    if problems:
        return Unknown(job, f"Flink job {jid} ({job}) at {rest_url}: " + "; ".join(dict.fromkeys(problems)))
    account = Account(
        job=job,
        reader=f"Flink job {jid}: "
        + " and ".join(read)
        + ("" if plan else f"; its columns as declared ({plan_problem or 'no compiled plan: a DataStream job'})"),
        inputs=_declared_first(pipeline, pipeline.job(job).inputs, inputs),
        outputs=_declared_first(pipeline, pipeline.job(job).outputs, outputs),
        columns=columns,
        location=f"{rest_url.rstrip('/')}/jobs/{jid}",
    )
    return with_declared_columns(account, pipeline)


def _declared_first(pipeline: Pipeline, declared: Iterable[str], names: list[DatasetName]) -> tuple[DatasetName, ...]:
    """``names`` without repeats, the declared ones first in declared order (the engine lists them as it likes),
    then the others as the engine listed them."""
    order = {pipeline.dataset(k).namespace + "/" + pipeline.dataset(k).name: i for i, k in enumerate(declared)}
    unique = list(dict.fromkeys(names))
    return tuple(sorted(unique, key=lambda d: (order.get(str(d), len(order)), unique.index(d))))


def listener_events_of(path: Path, jid: str) -> list[dict]:
    """Every event of Flink job ``jid`` in the listener's file (a few lines per submission: read whole)."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except FileNotFoundError:
        return []
    events = []
    for line in text.splitlines():
        if jid not in line:
            continue
        try:
            event = json.loads(line)
        except json.JSONDecodeError:
            continue  # a line being written now
        if ((event.get("run") or {}).get("facets") or {}).get("flink_job", {}).get("jobId") == jid:
            events.append(event)
    return events


def read_account(client: FlinkClient, pipeline: Pipeline, job: str, jid: str) -> Account | Unknown:
    """Flink job ``jid``'s account, asked now: its listener events on this host and its configuration over REST
    (the client's timeout bounds the call; a cluster that does not answer gives Unknown)."""
    path = client.listener_events_file()
    try:
        config = client.user_config(jid)
    except FlinkError as exc:
        return Unknown(
            job,
            f"Flink at {client.url} did not give Flink job {jid}'s configuration ({exc}); is the cluster up "
            "(`lineage-lab stack status`)?",
        )
    return flink_account(pipeline, job, jid, listener_events_of(path, jid), config, str(path), client.url)
