"""What a sensor asks for after it records a materialization: a run of that asset's checks.

A tick only reads what the engines say now and records events; the checks (Marquez's graph, the engine's account,
the hop's reconciliation) run in a run of the streaming checks job, so no store can hold a tick (issue 37). Dagster
reports a tick's asset events before it submits the tick's runs, and a check run evaluates the latest materialization
when its step reads it: a run that has not started yet evaluates the newest one. So a tick asks only for the checks
no waiting run of the same sensor already covers, and the asset page shows, for every latest materialization, each
check's result and the run that produced it. While data flows a sensor materializes every tick; it asks for a check
run at most every ``min_interval_s`` and keeps the assets materialized in between owed (in its cursor) for the next
one, which a later tick asks for even when it materializes nothing.

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
#: the cursor entries of the assets whose checks are owed a run, and of when the sensor last asked for one
OWED_KEY = "checks_owed"
ASKED_AT_KEY = "checks_asked_at"
#: a run in these states has not read the latest materialization yet
NOT_STARTED = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING]


@dataclass(frozen=True)
class LatestChecks:
    """The job that runs the streaming assets' checks, and each such asset's check keys."""

    job_name: str
    checks_of: Mapping[dg.AssetKey, tuple[dg.AssetCheckKey, ...]]
    #: seconds a sensor lets pass between two check runs it asks for
    min_interval_s: float = 0.0

    @classmethod
    def of(
        cls,
        job_name: str,
        checks: Iterable[dg.AssetChecksDefinition],
        assets: Iterable[dg.AssetKey],
        min_interval_s: float = 0.0,
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
        checks_of = {asset: tuple(k for k in keys if k.asset_key == asset) for asset in wanted}
        return cls(job_name, checks_of, min_interval_s)

    def waiting(self, instance: dg.DagsterInstance, sensor: str) -> set[dg.AssetCheckKey]:
        """The checks that runs this sensor asked for and that have not started will evaluate (read from the
        instance's run storage: no store of the pipeline is asked)."""
        records = instance.get_run_records(
            dg.RunsFilter(job_name=self.job_name, statuses=NOT_STARTED, tags={REQUESTED_BY: sensor})
        )
        return {key for record in records for key in record.dagster_run.asset_check_selection or ()}

    def request(
        self,
        instance: dg.DagsterInstance,
        sensor: str,
        materialized: Sequence[dg.AssetKey],
        cursor: dict,
        now: float,
    ) -> dg.RunRequest | None:
        """A run of the checks of ``materialized`` and of the assets owed one, that no waiting run covers, or None
        (nothing to check, all covered, or the last run asked for less than ``min_interval_s`` ago: then the assets
        stay owed). Keeps the owed assets, the count and the time in ``cursor``."""
        owed = [dg.AssetKey.from_user_string(text) for text in cursor.get(OWED_KEY, [])]
        assets = [asset for asset in dict.fromkeys([*owed, *materialized]) if asset in self.checks_of]
        if not assets:
            return None
        if now - float(cursor.get(ASKED_AT_KEY, 0.0)) < self.min_interval_s:
            cursor[OWED_KEY] = [asset.to_user_string() for asset in assets]
            return None
        cursor.pop(OWED_KEY, None)
        covered = self.waiting(instance, sensor)
        missing = [key for asset in assets for key in self.checks_of[asset] if key not in covered]
        if not missing:
            return None
        cursor[CURSOR_KEY] = int(cursor.get(CURSOR_KEY, 0)) + 1
        cursor[ASKED_AT_KEY] = now
        return dg.RunRequest(
            run_key=f"{sensor}-checks-{cursor[CURSOR_KEY]}",
            job_name=self.job_name,
            asset_check_keys=missing,
            tags={REQUESTED_BY: sensor},
        )
