"""A streaming job's open run, told what its hop moved: a RUNNING event whose input and outputs carry
``inputStatistics`` / ``outputStatistics`` (rows the input gave and each output gained since the previous such
event of that run) and whose input carries the conservation result as ``dataQualityAssertions``. Marquez keeps them
per run and per dataset version, so the counts sit beside the lineage they belong to.

The period's start is remembered per run (CountStore facts): the first sight of a run only records where it
starts, so every rowCount sent covers a period this process saw from both ends.
"""

from __future__ import annotations

import json

from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.generated import (
    data_quality_assertions_dataset,
    input_statistics_input_dataset,
    output_statistics_output_dataset,
)

from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.store import CountStore
from lineage_assets.lineage.events import Engine, EventBuilder

_KIND = "ol_statistics"


def assertions(balance: HopBalance) -> data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet:
    """The conservation result as assertions on the hop's input: none of its records missing, none doubled."""
    return data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet(
        assertions=[
            data_quality_assertions_dataset.Assertion(
                assertion="conservation: no record missing",
                success=balance.missing == 0,
                expected="0",
                actual=str(balance.missing),
            ),
            data_quality_assertions_dataset.Assertion(
                assertion="conservation: no record doubled",
                success=balance.duplicates == 0,
                expected="0",
                actual=str(balance.duplicates),
            ),
        ]
    )


def statistics_event(
    builder: EventBuilder,
    counts: CountStore,
    hop: Hop,
    run_id: str,
    balance: HopBalance,
    engine: Engine | None = None,
    confirmed: bool = True,
) -> RunEvent | None:
    """The RUNNING event of ``run_id`` with what the hop moved since the last one, or None when this is the first
    sight of the run (its period starts now) or the figures are unknown. ``confirmed``: the balance is a second
    look (or exact); a single look that shows a loss sends statistics but no assertions."""
    if not balance.known:
        return None
    now = {"in": balance.in_, "out": balance.out, "dead_letters": balance.dead_letters}
    key = f"{hop.job.name}/{run_id}"
    before = counts.facts(_KIND).get(key)
    counts.put_facts(_KIND, {key: json.dumps(now)})
    if before is None:
        return None
    was = json.loads(before)
    gained = {k: now[k] - was[k] for k in now}  # type: ignore[operator]
    facets: dict[str, dict] = {
        hop.input.key: {
            "inputStatistics": input_statistics_input_dataset.InputStatisticsInputDatasetFacet(rowCount=gained["in"])
        },
        hop.output.key: {
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=gained["out"]
            )
        },
    }
    if hop.dead_letters is not None:
        facets[hop.dead_letters.key] = {
            "outputStatistics": output_statistics_output_dataset.OutputStatisticsOutputDatasetFacet(
                rowCount=gained["dead_letters"]
            )
        }
    if confirmed or not balance.lost_or_doubled:
        facets[hop.input.key]["dataQualityAssertions"] = assertions(balance)
    return builder.event(hop.job.name, RunState.RUNNING, run_id, engine=engine, dataset_facets=facets)
