"""The ``conservation`` check on each hop's output asset: every record of the hop's input is in its outputs, its
dead letters or still pending. It fails on records missing or doubled (naming any other writer and the count), warns
when records stay pending longer than ``conservation_pending_warn_s`` or when a store cannot be read (then nothing
is concluded), and records the figures as numeric metadata, so the asset page plots them over time. A hop of a job
that runs forever also tells the job's open OpenLineage run what it moved (hop_statistics.py).
"""

import time
from pathlib import Path
from types import SimpleNamespace

import dagster as dg

from lineage_assets.checks.hop_statistics import tell_open_run
from lineage_assets.connect.resource import ConnectResource
from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.reconcile import reconcile
from lineage_assets.conservation.rules import reconciled_hops
from lineage_assets.conservation.stores import Stores
from lineage_assets.flink.resource import FlinkResource
from lineage_assets.kafka.resource import KafkaResource
from lineage_assets.lineage.identity import Pipeline
from lineage_assets.lineage.resource import LineageResource
from lineage_assets.metadata import asset_key
from lineage_assets.source.resource import SourceDatabaseResource
from lineage_assets.storage import IcebergResource, ObjectStoreResource

CHECK = "conservation"
#: seconds a check waits for another reconciliation of the same hop (the CLI's, another run's) before saying the hop
#: is busy (unknown) instead of waiting for it
LOCK_WAIT_S = 600.0
DESCRIPTION = (
    "every record of the hop's input is in its outputs, its dead letters or pending (not yet committed), and every "
    "summed column adds up to its input column; fails on missing or doubled records or values that differ, warns on "
    "records pending too long or a store that cannot be read"
)
#: the resources a reconciliation reads (never Spark: building it starts a Spark session)
FIGURES = ("in", "out", "dead_letters", "pending", "missing", "duplicates")
VALUE_FIGURES = ("in", "out", "dead_letters", "pending", "difference")


def checked_hops(pipeline: Pipeline) -> list[Hop]:
    return list(reconciled_hops(pipeline).values())


def value_figures(balance: HopBalance) -> dict[str, dg.MetadataValue]:
    """Each summed column's figures as numbers Dagster plots (``conservation/values/<column>/<figure>``, in the
    column's unit: 12.34 for a price); the exact decimals are in the ``values`` JSON beside them."""
    found: dict[str, dg.MetadataValue] = {}
    for v in balance.values:
        for figure, text in v.as_dict().items():
            if figure in VALUE_FIGURES and text is not None:
                found[f"conservation/values/{v.column}/{figure}"] = dg.MetadataValue.float(float(text))
    return found


def result_for(balance: HopBalance, key: dg.AssetKey, pending_warn_s: int, now: float) -> dg.AssetCheckResult:
    """The check result a balance makes: ERROR on loss, duplication or values that do not add up (the message names
    the window, day or object), WARN on pending older than ``pending_warn_s`` or unknown figures."""
    age = balance.pending_age(now)
    too_old = age is not None and age > pending_warn_s
    passed = balance.status in ("balanced", "pending") and not too_old
    severity = dg.AssetCheckSeverity.ERROR if balance.wrong else dg.AssetCheckSeverity.WARN
    message = balance.summary()
    if too_old:
        message += f"; the oldest pending record waits for {age:.0f} s (> {pending_warn_s} s)"
    as_dict = balance.as_dict()
    figures = {f"conservation/{k}": dg.MetadataValue.int(as_dict[k]) for k in FIGURES if as_dict[k] is not None}
    return dg.AssetCheckResult(
        asset_key=key,
        check_name=CHECK,
        passed=passed,
        severity=severity,
        description=message,
        metadata={
            "status": balance.status,
            **figures,
            **value_figures(balance),
            "values": dg.MetadataValue.json({v.column: v.as_dict() for v in balance.values}),
            "range": dg.MetadataValue.json(balance.range),
            "other_writers": dg.MetadataValue.json([w.as_dict() for w in balance.other_writers]),
            "pending_age_s": dg.MetadataValue.float(round(age, 1)) if age is not None else dg.MetadataValue.null(),
            "notes": dg.MetadataValue.md("\n".join(f"- {n}" for n in balance.notes)),
            "job": balance.job,
        },
    )


def observation_for(balance: HopBalance, key: dg.AssetKey) -> dg.AssetObservation:
    """The figures as an observation of the asset: Dagster plots an asset's numeric observation metadata over
    time on its page."""
    as_dict = balance.as_dict()
    return dg.AssetObservation(
        asset_key=key,
        metadata={
            **{f"conservation/{k}": dg.MetadataValue.int(as_dict[k]) for k in FIGURES if as_dict[k] is not None},
            **value_figures(balance),
        },
    )


#: the one step that evaluates the conservation check of every hop
CHECKS_NAME = "conservation_checks"


def build_conservation_checks(
    pipeline: Pipeline, pending_warn_s: int, count_store: Path
) -> list[dg.AssetChecksDefinition]:
    """One multi-asset check carrying the ``conservation`` check of every hop's output, subsettable: a run reconciles
    the selected hops in one call, so the hops that look lost or doubled are read again after ONE wait
    (``CONFIRM_AFTER_S``) instead of one wait each, one after another (a check run of the streaming assets took 55-74
    s with two or three such hops, 31 s with one; CI of 1a9ff41, 2026-12-07).

    ``pending_warn_s``: warn on records pending longer; ``count_store``: where reconciliation keeps its counts."""
    by_key = {asset_key(hop.output): hop for hop in checked_hops(pipeline)}

    @dg.multi_asset_check(
        specs=[dg.AssetCheckSpec(CHECK, asset=key, description=DESCRIPTION) for key in by_key],
        name=CHECKS_NAME,
        description="the conservation check of every hop's output, its streaming hops confirmed after one wait",
        can_subset=True,
    )
    def conservation_checks(
        context: dg.AssetCheckExecutionContext,
        kafka: KafkaResource,
        iceberg: IcebergResource,
        object_store: ObjectStoreResource,
        flink: FlinkResource,
        connect: ConnectResource,
        source_db: SourceDatabaseResource,
        lineage: LineageResource,
    ):
        resources = SimpleNamespace(
            kafka=kafka,
            iceberg=iceberg,
            object_store=object_store,
            flink=flink,
            connect=connect,
            source_db=source_db,
            lineage=lineage,
        )
        stores = Stores(pipeline, resources, count_store)
        selected = {c.asset_key: by_key[c.asset_key] for c in context.selected_asset_check_keys}
        jobs = sorted(hop.job.name for hop in selected.values())
        balances = {b.job: b for b in reconcile(stores, jobs=jobs, lock_timeout=LOCK_WAIT_S)} if jobs else {}
        untold = []
        for key, hop in selected.items():
            balance = balances[hop.job.name]
            context.op_execution_context.log_event(observation_for(balance, key))
            try:
                told = tell_open_run(context.instance, pipeline, hop, key, balance, stores.counts, resources)
                context.log.info(f"{hop.job.name}: {told}")
            except Exception as exc:  # one hop's side effect never costs another hop its result
                context.log.exception(f"{hop.job.name}: its open run was not told what the hop moved")
                untold.append(f"{hop.job.name} ({type(exc).__name__}: {exc})")
            yield result_for(balance, key, pending_warn_s, time.time())
        if untold:  # every result above is recorded; the step fails so that the run shows it
            raise dg.Failure(
                f"the open runs of {', '.join(untold)} were not told what their hops moved (the checks' results "
                "stand); see the step's log, fix the store it names and run the checks again"
            )

    return [conservation_checks]
