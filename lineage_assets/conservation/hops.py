"""The hops to reconcile, derived from the identity module's jobs: each job declared with a ``kind`` is a hop from
its one input to its data outputs, with its dead-letter topic apart (what it refused on purpose).
"""

from __future__ import annotations

from dataclasses import dataclass

from lineage_assets.lineage.identity import Dataset, Job, Pipeline


@dataclass(frozen=True)
class Hop:
    job: Job
    input: Dataset
    outputs: tuple[Dataset, ...]
    dead_letters: Dataset | None

    @property
    def output(self) -> Dataset:
        """The output whose asset carries the hop's ``conservation`` check."""
        return self.outputs[0]

    @property
    def output_names(self) -> tuple[str, ...]:
        named = [d.qualified_name for d in self.outputs]
        return tuple(named + ([self.dead_letters.qualified_name] if self.dead_letters else []))


def hops(pipeline: Pipeline) -> dict[str, Hop]:
    """job name -> its hop, in the pipeline's order (the data flow)."""
    found: dict[str, Hop] = {}
    for job in pipeline.jobs.values():
        if job.kind is None or not job.outputs:
            continue
        dead = pipeline.dataset(job.dead_letters) if job.dead_letters else None
        outputs = tuple(pipeline.dataset(k) for k in job.outputs if dead is None or k != dead.key)
        found[job.name] = Hop(job, pipeline.dataset(job.inputs[0]), outputs, dead)
    return found
