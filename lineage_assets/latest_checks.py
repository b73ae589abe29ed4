"""What a sensor asks for after it records a materialization: a run of that asset's checks.

A tick only reads what the engines say now and records events; the checks (Marquez's graph, the engine's account,
the hop's reconciliation) run in a run of the streaming checks job, so no store can hold a tick (issue 37). Dagster
reports a tick's asset events before it submits the tick's runs, and a check run evaluates the latest materialization
when its step reads it: a run that has not started yet evaluates the newest one. So a tick asks only for the checks
no waiting run of the same sensor already covers, and the asset page shows, for every latest materialization, each
check's result and the run that produced it.

Declared here, below both the sensors and the checks, so a sensor names the checks without importing them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import dagster as dg

from infra.services.dagster import CHECK_RUNS_TAG

#: the run tag naming the sensor whose materializations a check run evaluates (the instance runs one such run at a
#: time)
REQUESTED_BY = CHECK_RUNS_TAG
#: the cursor entry counting a sensor's check requests (the run key: a tick re-evaluated on the same cursor asks for
#: the same run, and Dagster launches it once)
CURSOR_KEY = "check_requests"
#: a run in these states has not read the latest materialization yet
NOT_STARTED = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]


@dataclass(frozen=True)
class LatestChecks:
    """The job that runs the streaming assets' checks, and each such asset's check keys."""

    job_name: str
    checks_of: Mapping[dg.AssetKey, tuple[dg.AssetCheckKey, ...]]

    @classmethod
    def of(
        cls, job_name: str, checks: Iterable[dg.AssetChecksDefinition], assets: Iterable[dg.AssetKey]
    ) -> LatestChecks:
        """The checks of ``assets`` among ``checks`` (the definitions' own: a new check is asked for without a
        change here)."""
        wanted = set(assets)
        keys = [
            key
            for definition in checks
            for key in sorted(definition.check_keys, key=lambda k: k.name)
            if key.asset_key in wanted
        ]
        return cls(job_name, {asset: tuple(k for k in keys if k.asset_key == asset) for asset in wanted})

    def waiting(self, instance: dg.DagsterInstance, sensor: str) -> set[dg.AssetCheckKey]:
        """The checks that runs this sensor asked for and that have not started will evaluate (read from the
        instance's run storage: no store of the pipeline is asked)."""
        records = instance.get_run_records(
            dg.RunsFilter(job_name=self.job_name, statuses=NOT_STARTED, tags={REQUESTED_BY: sensor})
        )
        return {key for record in records for key in record.dagster_run.asset_check_selection or ()}

    def request(
        self, instance: dg.DagsterInstance, sensor: str, materialized: Sequence[dg.AssetKey], cursor: dict
    ) -> dg.RunRequest | None:
        """A run of the checks of ``materialized`` that no waiting run covers, or None; counts it in ``cursor``."""
        wanted = [key for asset in dict.fromkeys(materialized) for key in self.checks_of.get(asset, ())]
        if not wanted:
            return None
        covered = self.waiting(instance, sensor)
        missing = [key for key in wanted if key not in covered]
        if not missing:
            return None
        cursor[CURSOR_KEY] = int(cursor.get(CURSOR_KEY, 0)) + 1
        return dg.RunRequest(
            run_key=f"{sensor}-checks-{cursor[CURSOR_KEY]}",
            job_name=self.job_name,
            asset_check_keys=missing,
            tags={REQUESTED_BY: sensor},
        )
