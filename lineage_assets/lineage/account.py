"""A job's lineage as its engine accounts for it: what it reads and writes, down to the columns.

The engines are the truth: Flink (its OpenLineage listener and the job's compiled plan), Kafka Connect (each
connector's live configuration) and Spark (its OpenLineage listener) say what a job does now, whoever started it.
An ``Account`` holds what one of them said, named through the identity module's naming functions (spelling only:
a dataset the pipeline does not declare keeps its own name). The identity module's declaration is the expectation:
``declared_account`` turns it into the same shape, ``differences`` names every dataset and column where the two
part. An account that could not be read is ``Unknown``, with what was asked and what to do; nothing falls back to
the declaration without saying so.

Each output column says whether its lineage was ``observed`` (from the engine) or ``declared`` (a job whose columns
the engine cannot show, such as a DataStream job: the declaration stands, marked as such).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Literal

from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.naming import physical_key

Origin = Literal["observed", "declared"]
OBSERVED: Origin = "observed"
DECLARED: Origin = "declared"


@dataclass(frozen=True, order=True)
class DatasetName:
    """A dataset as OpenLineage names it: (namespace, name)."""

    namespace: str
    name: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def physical(self) -> tuple[str, str]:
        """What it points at, spelling differences removed (``naming.physical_key``)."""
        return physical_key(self.namespace, self.name)


@dataclass(frozen=True)
class SourceField:
    """One input column an output column is computed from, with how (OpenLineage's transformation type)."""

    dataset: DatasetName
    column: str
    type: Literal["DIRECT", "INDIRECT"] = "DIRECT"
    subtype: str = "IDENTITY"
    description: str = ""


@dataclass(frozen=True)
class ColumnAccount:
    """Where one output column comes from, and whether the engine said so or only the declaration does."""

    sources: tuple[SourceField, ...]
    origin: Origin


@dataclass(frozen=True)
class Account:
    """One job's lineage as read from ``reader`` (e.g. "Flink job 1a2b... (listener log, compiled plan)")."""

    job: str
    reader: str
    inputs: tuple[DatasetName, ...]
    outputs: tuple[DatasetName, ...]
    #: output dataset -> output column -> its sources
    columns: Mapping[DatasetName, Mapping[str, ColumnAccount]] = field(default_factory=dict)
    #: where the engine runs what it accounts for, changing with every change it makes (a Flink job id, a connector
    #: config record): sent as the job's sourceCodeLocation, so Marquez makes a job version of each. Marquez links a
    #: streaming job to a version only when it creates it, so a job put back to lineage it had before would keep
    #: showing the lineage it had in between
    location: str = ""

    def column_origins(self, output: DatasetName) -> dict[str, Origin]:
        return {column: c.origin for column, c in self.columns.get(output, {}).items()}

    def to_dict(self) -> dict:
        """JSON-ready (a sensor keeps the last account it reported in its cursor)."""
        return {
            "job": self.job,
            "reader": self.reader,
            "inputs": [[d.namespace, d.name] for d in self.inputs],
            "outputs": [[d.namespace, d.name] for d in self.outputs],
            "location": self.location,
            "columns": [
                [
                    [out.namespace, out.name],
                    {
                        column: {
                            "origin": c.origin,
                            "sources": [
                                [s.dataset.namespace, s.dataset.name, s.column, s.type, s.subtype, s.description]
                                for s in c.sources
                            ],
                        }
                        for column, c in columns.items()
                    },
                ]
                for out, columns in self.columns.items()
            ],
        }

    @classmethod
    def from_dict(cls, data: Mapping) -> Account:
        return cls(
            job=data["job"],
            reader=data["reader"],
            inputs=tuple(DatasetName(*d) for d in data["inputs"]),
            outputs=tuple(DatasetName(*d) for d in data["outputs"]),
            columns={
                DatasetName(*out): {
                    column: ColumnAccount(
                        tuple(SourceField(DatasetName(s[0], s[1]), *s[2:]) for s in c["sources"]), c["origin"]
                    )
                    for column, c in columns.items()
                }
                for out, columns in data.get("columns", [])
            },
            location=data.get("location", ""),
        )


@dataclass(frozen=True)
class Unknown:
    """A job whose account could not be read now: ``reason`` names what was asked (an endpoint, a file) and what to
    do. Never replaced by the declaration."""

    job: str
    reason: str


def dataset_name(pipeline: Pipeline, key: str) -> DatasetName:
    ds = pipeline.dataset(key)
    return DatasetName(ds.namespace, ds.name)


def declared_columns(pipeline: Pipeline, job_name: str) -> dict[DatasetName, dict[str, ColumnAccount]]:
    """The job's declared column lineage, as accounts marked ``declared``."""
    job = pipeline.job(job_name)
    return {
        dataset_name(pipeline, out): {
            column: ColumnAccount(
                tuple(
                    SourceField(dataset_name(pipeline, s.dataset), s.column, s.type, s.subtype, s.description)
                    for s in sources
                ),
                DECLARED,
            )
            for column, sources in columns.items()
        }
        for out, columns in job.column_lineage.items()
    }


def declared_account(pipeline: Pipeline, job_name: str) -> Account:
    """The identity module's declaration of ``job_name`` in an account's shape: the expectation."""
    job = pipeline.job(job_name)
    return Account(
        job=job.name,
        reader="the identity module's declaration",
        inputs=tuple(dataset_name(pipeline, k) for k in job.inputs),
        outputs=tuple(dataset_name(pipeline, k) for k in job.outputs),
        columns=declared_columns(pipeline, job_name),
    )


def reportable(pipeline: Pipeline, account: Account | Unknown, last: Account | None = None) -> Account:
    """What an emitter reports for a job: its engine's account when known, else the last account it reported, else
    the declaration, saying in its ``reader`` that it stands in for an unknown account and why."""
    if isinstance(account, Account):
        return account
    if last is not None:
        return last
    declared = declared_account(pipeline, account.job)
    return replace(declared, reader=f"the declaration, standing in: the engine's account is unknown ({account.reason})")


def with_declared_columns(account: Account, pipeline: Pipeline) -> Account:
    """``account`` with the declared lineage of every column the engine did not account for, on each output that is
    a declared output of the job (marked ``declared``); an output the declaration does not know gets none."""
    declared = {out.physical: (out, cols) for out, cols in declared_columns(pipeline, account.job).items()}
    columns = {out: dict(cols) for out, cols in account.columns.items()}
    for out in account.outputs:
        if out.physical in declared:
            for column, c in declared[out.physical][1].items():
                columns.setdefault(out, {}).setdefault(column, c)
    return replace(account, columns=columns)


def _names(datasets: Iterable[DatasetName]) -> str:
    return ", ".join(str(d) for d in sorted(datasets)) or "nothing"


def _sources(sources: Iterable[SourceField]) -> str:
    return ", ".join(sorted(f"{s.dataset}.{s.column}" for s in sources if s.type == "DIRECT")) or "no column"


def differences(observed: Account, declared: Account) -> list[str]:
    """Every dataset and column where the engine's account and the declaration part, one sentence each, e.g.
    ``supplier-stats writes kafka://127.0.0.1:9092/supplier-stats-shadow; declared kafka://127.0.0.1:9092/supplier-stats``.
    Columns are compared on their direct sources (dataset and column), only where the engine accounted for them."""
    job = observed.job
    found = []
    for verb, have, want in (
        ("reads", observed.inputs, declared.inputs),
        ("writes", observed.outputs, declared.outputs),
    ):
        have_keys, want_keys = {d.physical for d in have}, {d.physical for d in want}
        extra = [d for d in have if d.physical not in want_keys]
        missing = [d for d in want if d.physical not in have_keys]
        if extra and missing:
            found.append(f"{job} {verb} {_names(extra)}; declared {_names(missing)}")
        elif extra:
            found.append(f"{job} {verb} {_names(extra)}; not declared")
        elif missing:
            found.append(f"{job} does not {verb.removesuffix('s')} {_names(missing)}; declared")
    declared_by_output = {out.physical: cols for out, cols in declared.columns.items()}
    for out, columns in sorted(observed.columns.items()):
        want_columns = declared_by_output.get(out.physical)
        if want_columns is None:
            continue  # an output the declaration does not have: named above
        seen = {c: a for c, a in columns.items() if a.origin == OBSERVED}
        if not seen:
            continue
        for column in sorted(set(seen) | set(want_columns)):
            have_c, want_c = seen.get(column), want_columns.get(column)
            if want_c is None and have_c is not None:
                found.append(f"{job} writes column {out}.{column} from {_sources(have_c.sources)}; not declared")
            elif have_c is None:
                if column in columns or not _direct(want_c):
                    continue  # declared only and marked so, or computed from no column (an engine names none)
                found.append(f"{job} does not write column {out}.{column}; declared from {_sources(want_c.sources)}")
            elif _direct(have_c) != _direct(want_c):
                found.append(
                    f"{job} computes {out}.{column} from {_sources(have_c.sources)}; "
                    f"declared {_sources(want_c.sources)}"
                )
    return found


def _direct(c: ColumnAccount) -> set[tuple[tuple[str, str], str]]:
    return {(s.dataset.physical, s.column) for s in c.sources if s.type == "DIRECT"}
