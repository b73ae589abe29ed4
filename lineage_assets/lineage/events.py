"""OpenLineage run events for the pipeline's jobs, built from ``identity`` with openlineage-python's facet classes.

Every event of a job carries its jobType facet (Marquez treats a job as streaming only when the event itself says
so) and, for non-terminal and terminal events alike, the job's full inputs and outputs with schema, dataSource,
symlinks and column lineage: an event with empty inputs/outputs would make Marquez 0.51 drop the job's current edges
(seen: a cancelled Flink job whose run ended naming no dataset vanished from the lineage graph).
"""

from __future__ import annotations

import datetime as dt
import traceback
from dataclasses import dataclass

import attr
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import (
    column_lineage_dataset,
    datasource_dataset,
    error_message_run,
    job_type_job,
    nominal_time_run,
    parent_run,
    processing_engine_run,
    schema_dataset,
    source_code_location_job,
    symlinks_dataset,
)
from openlineage.client.generated.base import DatasetFacet, InputDatasetFacet, OutputDatasetFacet, RunFacet
from openlineage.client.serde import Serde
from openlineage.client.uuid import generate_static_uuid

from lineage_assets.lineage.account import Account, ColumnAccount, DatasetName
from lineage_assets.lineage.identity import Column, Dataset, Pipeline
from lineage_assets.lineage.identity import Job as PipelineJob

PRODUCER = "https://github.com/lineage-lab/lineage-lab"
TERMINAL = frozenset({RunState.COMPLETE, RunState.ABORT, RunState.FAIL})


@dataclass(frozen=True)
class ParentRun:
    """The run that started this one (for Dagster-launched work: the Dagster run)."""

    run_id: str
    job_namespace: str
    job_name: str


@dataclass(frozen=True)
class DagsterRun:
    """A Dagster run, e.g. the one that deployed a streaming job. Not a parent there: the job outlives the run, and
    a parent facet would make Marquez file the job under the parent's name (see identity.Job)."""

    run_id: str
    job_name: str
    asset_key: str


@attr.define
class DagsterRunFacet(RunFacet):
    """Custom run facet ``dagster_run``: the Dagster run behind this run (the one that deployed a streaming job,
    or, on the ``dagster`` job, the Dagster run itself with its Dagster job and asset)."""

    runId: str  # OpenLineage facets spell fields in camelCase
    jobName: str
    assetKey: str

    @staticmethod
    def _get_schema() -> str:
        return PRODUCER + "/blob/main/docs/facets/DagsterRunFacet.json"


@attr.define
class FlinkDeploymentRunFacet(RunFacet):
    """Custom run facet ``flink_deployment``: the Flink job a streaming run is (one run per Flink job id), the
    deployment version it carries, and how it started: deployed from Dagster, or found running on the cluster."""

    jobId: str
    version: str
    startedBy: str

    @staticmethod
    def _get_schema() -> str:
        return PRODUCER + "/blob/main/docs/facets/FlinkDeploymentRunFacet.json"


@attr.define
class ConnectorTask:
    id: int
    state: str
    workerId: str


@attr.define
class KafkaConnectorRunFacet(RunFacet):
    """Custom run facet ``kafka_connector``: the Connect connector a run is (one run per incarnation: a connector
    deleted and created again is a new one) and its tasks as Connect reported them when the run opened."""

    name: str
    incarnation: str
    tasks: list[ConnectorTask]

    @staticmethod
    def _get_schema() -> str:
        return PRODUCER + "/blob/main/docs/facets/KafkaConnectorRunFacet.json"


@attr.define
class LineageOriginDatasetFacet(DatasetFacet):
    """Custom dataset facet ``lineageOrigin`` on a job's output: who accounted for this job's lineage (the engine,
    and what of it was read) and, per output column, whether its column lineage was ``observed`` from the engine or
    ``declared`` by the identity module (a job whose columns the engine cannot show)."""

    reader: str
    columns: dict[str, str]

    @staticmethod
    def _get_schema() -> str:
        return PRODUCER + "/blob/main/docs/facets/LineageOriginDatasetFacet.json"


@dataclass(frozen=True)
class Engine:
    """The processing engine a run executes on (processing_engine run facet)."""

    name: str
    version: str
    adapter_version: str = "lineage-lab"


def run_id_for(job: str, started_at: dt.datetime, external_id: str) -> str:
    """A stable run id: the same job, start time and external id (a Flink job id, a connector task
    generation, a Dagster run id) always give the same UUID, so re-emitted events are idempotent."""
    return str(generate_static_uuid(started_at, f"{job}\x00{external_id}".encode()))


def iso(ts: dt.datetime) -> str:
    if ts.tzinfo is None:
        raise ValueError("event times must be timezone-aware")
    return ts.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


class EventBuilder:
    """Builds the events of one pipeline (one deployment's identities)."""

    def __init__(self, pipeline: Pipeline, observed_columns: dict[str, tuple[Column, ...]] | None = None) -> None:
        """``observed_columns`` replaces a dataset's declared columns by what was observed (e.g. the latest
        schema in the registry), keyed by dataset key."""
        self.pipeline = pipeline
        self.observed_columns = observed_columns or {}

    # datasets ---------------------------------------------------------------------------------------------
    def _dataset_facets(self, ds: Dataset) -> dict:
        columns = self.observed_columns.get(ds.key, ds.columns)
        facets: dict = {
            "schema": schema_dataset.SchemaDatasetFacet(
                fields=[
                    schema_dataset.SchemaDatasetFacetFields(name=c.name, type=c.type, description=c.description or None)
                    for c in columns
                ]
            ),
            "dataSource": datasource_dataset.DatasourceDatasetFacet(name=ds.namespace, uri=ds.namespace),
        }
        if ds.symlinks:
            facets["symlinks"] = symlinks_dataset.SymlinksDatasetFacet(
                identifiers=[symlinks_dataset.Identifier(s.namespace, s.name, s.type) for s in ds.symlinks]
            )
        return facets

    def input(self, key: str) -> InputDataset:
        ds = self.pipeline.dataset(key)
        return InputDataset(namespace=ds.namespace, name=ds.name, facets=self._dataset_facets(ds))

    def output(self, job: PipelineJob, key: str) -> OutputDataset:
        ds = self.pipeline.dataset(key)
        facets = self._dataset_facets(ds)
        lineage = job.column_lineage.get(key)
        if lineage:
            # Marquez keeps column lineage only for columns present in the same event's schema facet
            present = {c.name for c in self.observed_columns.get(key, ds.columns)}
            lineage = {column: sources for column, sources in lineage.items() if column in present}
        if lineage:
            facets["columnLineage"] = self._column_lineage(lineage)
        return OutputDataset(namespace=ds.namespace, name=ds.name, facets=facets)

    # datasets as an engine accounted for them --------------------------------------------------------------------
    def _named_facets(self, name: DatasetName) -> tuple[DatasetName, dict]:
        """The dataset's identity spelling and facets: a pipeline dataset's own (schema, dataSource, symlinks), else
        only its dataSource (a dataset the pipeline does not declare: the engine named it, nothing more is known)."""
        ds = self.pipeline.by_identity(name.namespace, name.name)
        if ds is not None:
            return DatasetName(ds.namespace, ds.name), self._dataset_facets(ds)
        return name, {"dataSource": datasource_dataset.DatasourceDatasetFacet(name=name.namespace, uri=name.namespace)}

    def _observed_input(self, name: DatasetName) -> InputDataset:
        spelled, facets = self._named_facets(name)
        return InputDataset(namespace=spelled.namespace, name=spelled.name, facets=facets)

    def _observed_output(self, account: Account, name: DatasetName) -> OutputDataset:
        spelled, facets = self._named_facets(name)
        columns = account.columns.get(name, {})
        if "schema" not in facets and columns:
            # Marquez keeps column lineage only for fields of the same event's schema: the columns the engine named
            facets["schema"] = schema_dataset.SchemaDatasetFacet(
                fields=[schema_dataset.SchemaDatasetFacetFields(name=c) for c in columns]
            )
        present = {f.name for f in facets["schema"].fields} if "schema" in facets else set()
        kept = {c: a for c, a in columns.items() if c in present}
        if kept:
            facets["columnLineage"] = self._account_lineage(kept)
        facets["lineageOrigin"] = LineageOriginDatasetFacet(
            reader=account.reader, columns={c: a.origin for c, a in kept.items()}
        )
        return OutputDataset(namespace=spelled.namespace, name=spelled.name, facets=facets)

    def _spelled(self, name: DatasetName) -> DatasetName:
        ds = self.pipeline.by_identity(name.namespace, name.name)
        return DatasetName(ds.namespace, ds.name) if ds else name

    def _account_lineage(self, columns: dict[str, ColumnAccount]) -> column_lineage_dataset.ColumnLineageDatasetFacet:
        fields = {}
        for column, account in columns.items():
            inputs = [
                column_lineage_dataset.InputField(
                    namespace=self._spelled(s.dataset).namespace,
                    name=self._spelled(s.dataset).name,
                    field=s.column,
                    transformations=[
                        column_lineage_dataset.Transformation(
                            type=s.type, subtype=s.subtype, description=s.description or None
                        )
                    ],
                )
                for s in account.sources
            ]
            direct = [s for s in account.sources if s.type == "DIRECT"]
            first = direct[0] if direct else None
            fields[column] = column_lineage_dataset.Fields(
                inputFields=inputs,
                transformationType=first.type if first else "INDIRECT",
                transformationDescription=(
                    (first.description or f"{first.type} {first.subtype}") if first else "computed from no column"
                )
                + f" ({account.origin})",
            )
        return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields)

    def _column_lineage(self, lineage) -> column_lineage_dataset.ColumnLineageDatasetFacet:
        fields = {}
        for column, sources in lineage.items():
            inputs = []
            for src in sources:
                ds = self.pipeline.dataset(src.dataset)
                inputs.append(
                    column_lineage_dataset.InputField(
                        namespace=ds.namespace,
                        name=ds.name,
                        field=src.column,
                        transformations=[
                            column_lineage_dataset.Transformation(
                                type=src.type, subtype=src.subtype, description=src.description or None
                            )
                        ],
                    )
                )
            if not sources:  # computed from no column (a count of rows)
                fields[column] = column_lineage_dataset.Fields(
                    inputFields=[], transformationType="INDIRECT", transformationDescription="count of rows"
                )
                continue
            first = sources[0]
            # field-level type/description: the 1-0-0 shape Marquez stores, alongside the per-input transformations
            fields[column] = column_lineage_dataset.Fields(
                inputFields=inputs,
                transformationType=first.type,
                transformationDescription=first.description or f"{first.type} {first.subtype}",
            )
        return column_lineage_dataset.ColumnLineageDatasetFacet(fields=fields)

    # events -----------------------------------------------------------------------------------------------
    def event(
        self,
        job_name: str,
        state: RunState,
        run_id: str,
        *,
        event_time: dt.datetime | None = None,
        parent: ParentRun | None = None,
        dagster_run: DagsterRun | None = None,
        engine: Engine | None = None,
        error: BaseException | tuple[str, str] | None = None,
        nominal_start: dt.datetime | None = None,
        nominal_end: dt.datetime | None = None,
        run_facets: dict[str, RunFacet] | None = None,
        dataset_facets: dict[str, dict] | None = None,
        account: Account | None = None,
    ) -> RunEvent:
        """One run event of ``job_name`` with every facet the job has.

        ``dataset_facets``: dataset key -> facets added to that input or output in this event only (statistics,
        data quality assertions).

        ``account``: the job's inputs, outputs and column lineage as its engine accounted for them (see
        account.py); without one, the identity module's declaration (for jobs whose events Dagster itself
        knows, e.g. the Dagster run). Each output then says who accounted for it (``lineageOrigin``).

        ``error`` is an exception (its Python traceback is attached) or a (message, stack trace) pair from
        another engine (a Connect task trace, a Flink failure cause), attached as a JAVA stack trace.
        """
        job = self.pipeline.job(job_name)
        run_facets = dict(run_facets or {})
        if parent:
            run_facets["parent"] = parent_run.ParentRunFacet(
                run=parent_run.Run(runId=parent.run_id),
                job=parent_run.Job(namespace=parent.job_namespace, name=parent.job_name),
            )
        if dagster_run:
            run_facets["dagster_run"] = DagsterRunFacet(
                runId=dagster_run.run_id, jobName=dagster_run.job_name, assetKey=dagster_run.asset_key
            )
        if engine:
            run_facets["processing_engine"] = processing_engine_run.ProcessingEngineRunFacet(
                version=engine.version, name=engine.name, openlineageAdapterVersion=engine.adapter_version
            )
        if nominal_start:
            run_facets["nominalTime"] = nominal_time_run.NominalTimeRunFacet(
                nominalStartTime=iso(nominal_start), nominalEndTime=iso(nominal_end) if nominal_end else None
            )
        if error is not None:
            if isinstance(error, BaseException):
                message = f"{type(error).__name__}: {error}"
                trace = "".join(traceback.format_exception(error))
                language = "PYTHON"
            else:
                message, trace = error
                language = "JAVA"
            run_facets["errorMessage"] = error_message_run.ErrorMessageRunFacet(
                message=message, programmingLanguage=language, stackTrace=trace
            )
        return RunEvent(
            eventType=state,
            eventTime=iso(event_time or dt.datetime.now(dt.UTC)),
            run=Run(runId=run_id, facets=run_facets),
            job=Job(namespace=job.namespace, name=job.name, facets=self._job_facets(job, account)),
            inputs=self._inputs(job, account, dataset_facets or {}),
            outputs=self._outputs(job, account, dataset_facets or {}),
            producer=PRODUCER,
        )

    @staticmethod
    def _job_facets(job: PipelineJob, account: Account | None) -> dict:
        facets: dict = {
            "jobType": job_type_job.JobTypeJobFacet(
                processingType=job.processing_type, integration=job.integration, jobType=job.job_type
            )
        }
        if account is not None and account.location:
            facets["sourceCodeLocation"] = source_code_location_job.SourceCodeLocationJobFacet(
                type=job.integration.lower(), url=account.location
            )
        return facets

    def _key(self, dataset: InputDataset | OutputDataset) -> str | None:
        ds = self.pipeline.by_identity(dataset.namespace, dataset.name)
        return ds.key if ds else None

    def _inputs(self, job: PipelineJob, account: Account | None, extra: dict[str, dict]) -> list[InputDataset]:
        if account is None:
            return [_with(self.input(k), extra.get(k)) for k in job.inputs]
        inputs = [self._observed_input(d) for d in account.inputs]
        return [_with(d, extra.get(self._key(d) or "")) for d in inputs]

    def _outputs(self, job: PipelineJob, account: Account | None, extra: dict[str, dict]) -> list[OutputDataset]:
        if account is None:
            return [_with(self.output(job, k), extra.get(k)) for k in job.outputs]
        outputs = [self._observed_output(account, d) for d in account.outputs]
        return [_with(d, extra.get(self._key(d) or "")) for d in outputs]


def _with(dataset: InputDataset | OutputDataset, extra: dict | None) -> InputDataset | OutputDataset:
    """``dataset`` with ``extra`` facets, each where the spec puts its kind: input, output or dataset facets."""
    for name, facet in (extra or {}).items():
        if isinstance(facet, InputDatasetFacet) and isinstance(dataset, InputDataset):
            dataset.inputFacets = {**(dataset.inputFacets or {}), name: facet}
        elif isinstance(facet, OutputDatasetFacet) and isinstance(dataset, OutputDataset):
            dataset.outputFacets = {**(dataset.outputFacets or {}), name: facet}
        else:
            dataset.facets = {**(dataset.facets or {}), name: facet}
    return dataset


def to_json(event: RunEvent) -> str:
    return Serde.to_json(event)


def is_terminal(state: RunState | str) -> bool:
    return RunState(state) in TERMINAL
