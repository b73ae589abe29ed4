"""A streaming job's open run, told what its hop moved: a RUNNING event whose input and outputs carry
``inputStatistics`` / ``outputStatistics`` (rows the input gave and each output gained from the job since the
previous such event of that run) and whose input carries the conservation result as ``dataQualityAssertions``.
Marquez keeps them per run and per dataset version, so the counts sit beside the lineage they belong to.

The output's rowCount is what the JOB wrote: the change of the hop's ``out`` less what other writers changed in
the output meanwhile (a row appended or deleted by hand is not the job's output, and accepting a change with
``reconcile --accept``, which moves it out of ``out``, does not move the figure either). The other writers' net
rows of the period and the two cuts it lies between (the reader's ``range`` at each look: offsets, snapshot,
object counts) ride along in the run facet ``conservation_period``, so anyone can check a rowCount against the
stores: a figure without its period cannot be checked.

The period's start is remembered per run (CountStore facts): the first sight of a run only records where it
starts, so every rowCount sent covers a period this process saw from both ends.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

import attr
from openlineage.client.event_v2 import RunEvent, RunState
from openlineage.client.generated import (
    data_quality_assertions_dataset,
    input_statistics_input_dataset,
    output_statistics_output_dataset,
)
from openlineage.client.generated.base import RunFacet

from lineage_assets.conservation.balance import HopBalance
from lineage_assets.conservation.count_store import CountStore
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.values import text_of
from lineage_assets.lineage.account import Account
from lineage_assets.lineage.events import PRODUCER, Engine, EventBuilder, iso

_KIND = "ol_statistics"
#: the run facet that states the period of the statistics in the same event
PERIOD_FACET = "conservation_period"


@attr.define
class ConservationPeriodRunFacet(RunFacet):
    """Custom run facet ``conservation_period``: the period the event's statistics cover, as the two cuts of the
    hop's reader (``start``: the range at the previous look, ``end``: the range now, with when each was taken), and
    the net rows other writers changed in each output meanwhile (left out of that output's rowCount)."""

    startTime: str  # OpenLineage facets spell fields in camelCase
    endTime: str
    start: dict[str, Any]
    end: dict[str, Any]
    otherWriters: dict[str, int]

    @staticmethod
    def _get_schema() -> str:
        return PRODUCER + "/blob/main/docs/facets/ConservationPeriodRunFacet.json"


def assertions(balance: HopBalance) -> data_quality_assertions_dataset.DataQualityAssertionsDatasetFacet:
    """The conservation result as assertions on the hop's input: none of its records missing, none doubled, and
    each summed column adds up (its difference 0)."""
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
            *(
                data_quality_assertions_dataset.Assertion(
                    assertion=f"conservation: {v.column} adds up to the sum of {v.source}"
                    if v.places
                    else f"conservation: the {v.column} of {v.source} matches",
                    success=v.difference == 0,
                    expected=text_of(0, v.places),
                    actual=str(text_of(v.difference, v.places)),
                    column=v.source if v.places else None,
                )
                for v in balance.values
            ),
        ]
    )


def _look(hop: Hop, balance: HopBalance, at: str) -> dict[str, Any]:
    """What is remembered of one look: the figures, the other writers' net rows per output (accepted ones too: an
    acceptance changes no store), the cut and its time. ``out`` is kept as the job's own: accepting a change takes
    its rows out of ``out``; they are put back, and every other writer's rows in a data output taken out."""
    data = {d.qualified_name for d in hop.outputs}
    others: dict[str, int] = {}
    for writer in (*balance.other_writers, *balance.accepted):
        others[writer.output] = others.get(writer.output, 0) + writer.rows
    accepted = sum(w.rows for w in balance.accepted if w.output in data)
    own_out = balance.out + accepted - sum(rows for name, rows in others.items() if name in data)  # type: ignore[operator]
    # foreign records of a dead-letter topic are counted in dead_letters (HopBalance's contract): not the job's
    in_dlq = [w for w in (*balance.other_writers, *balance.accepted) if w.figure == "dead_letters"]
    dlq_accepted = sum(w.rows for w in balance.accepted if w.figure == "dead_letters")
    return {
        "in": balance.in_,
        "out": own_out,
        "dead_letters": balance.dead_letters + dlq_accepted - sum(w.rows for w in in_dlq),  # type: ignore[operator]
        "others": others,
        "range": json.loads(json.dumps(balance.range, default=str)),
        "at": at,
    }


def statistics_event(
    builder: EventBuilder,
    counts: CountStore,
    hop: Hop,
    run_id: str,
    balance: HopBalance,
    engine: Engine | None = None,
    confirmed: bool = True,
    now: dt.datetime | None = None,
    account: Account | None = None,
) -> RunEvent | None:
    """The RUNNING event of ``run_id`` with what the hop moved since the last one, or None when this is the first
    sight of the run (its period starts now; also when the run was last seen by a version that did not remember
    its cut) or the figures are unknown. ``confirmed``: the balance is a second look (or exact); a single look that
    shows a loss sends statistics but no assertions. ``account``: the job's datasets as its engine accounts for them
    (the event must not put the declaration back over them)."""
    if not balance.known:
        return None
    at = iso(now or dt.datetime.now(dt.UTC))
    look = _look(hop, balance, at)
    key = f"{hop.job.name}/{run_id}"
    before = counts.facts(_KIND).get(key)
    counts.put_facts(_KIND, {key: json.dumps(look)})
    if before is None:
        return None
    was = json.loads(before)
    if "range" not in was:  # remembered before the period was: its out may hold other writers' rows
        return None
    gained = {k: look[k] - was[k] for k in ("in", "out", "dead_letters")}
    # an output's other writers can also vanish (accepted, or re-read as the job's): union of both looks
    outputs_others = {
        name: look["others"].get(name, 0) - was["others"].get(name, 0)
        for name in sorted({*look["others"], *was["others"]})
        if look["others"].get(name, 0) != was["others"].get(name, 0)
    }
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
    if confirmed or not balance.wrong:
        facets[hop.input.key]["dataQualityAssertions"] = assertions(balance)
    period = ConservationPeriodRunFacet(
        startTime=was["at"], endTime=at, start=was["range"], end=look["range"], otherWriters=outputs_others
    )
    return builder.event(
        hop.job.name,
        RunState.RUNNING,
        run_id,
        engine=engine,
        run_facets={PERIOD_FACET: period},
        dataset_facets=facets,
        account=account,
    )
