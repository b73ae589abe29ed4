"""The events of the OpenLineage Flink listener, as its file transport writes them (infra/services/flink.py sets
the transport; the listener runs in the submitting client, so the file is on this machine).

A job's events are recognised by the Flink job id in their ``flink_job`` run facet. Reading starts at the byte
offset taken before the submission, so a busy log is not re-read.

Before an event goes on, its datasets become the job's account (``as_accounted``, see job_lineage.py): the
listener's own datasets, spelled as the identity module spells them, with schemas and the plan's column lineage.
The listener adds each Flink table name as a symlink in the topic's namespace
(``default_catalog.default_database.<table>``), which Marquez would show as a second dataset of the topic, and it
sends no schema for Kafka inputs.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

from openlineage.client.serde import Serde

from lineage_assets.lineage.account import Account
from lineage_assets.lineage.events import EventBuilder, RunState


class ListenerLog:
    def __init__(self, path: Path) -> None:
        self.path = path

    def mark(self) -> int:
        """The current end of the log: read from here after a submission."""
        return self.path.stat().st_size if self.path.exists() else 0

    def events_for(self, jid: str, since: int = 0, wait_seconds: float = 0.0) -> list[dict]:
        """The listener's events for Flink job ``jid`` written after ``since``; waits up to ``wait_seconds`` for
        the first one (the client writes it while submitting)."""
        deadline = time.monotonic() + wait_seconds
        while True:
            found = [e for e in self._read(since) if _flink_job_id(e) == jid]
            if found or time.monotonic() >= deadline:
                return found
            time.sleep(0.5)

    def _read(self, since: int) -> list[dict]:
        if not self.path.exists():
            return []
        with self.path.open("rb") as f:
            f.seek(since)
            lines = f.read().decode("utf-8", errors="replace").splitlines()
        events = []
        for line in lines:
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                continue  # a line being written right now; it is read complete next time
        return events


def _flink_job_id(event: dict) -> str | None:
    return ((event.get("run") or {}).get("facets") or {}).get("flink_job", {}).get("jobId")


def as_accounted(event: dict, builder: EventBuilder, job: str, account: Account) -> dict:
    """The listener's event with the job's identity and the datasets of its account (schemas, column lineage,
    declared symlinks only); its run facets (the Flink job id, the engine) and time are kept."""
    declared = builder.event(job, RunState(event["eventType"]), event["run"]["runId"], account=account)
    job_facets = {**Serde.to_dict(declared.job).get("facets", {}), **(event.get("job") or {}).get("facets", {})}
    return {
        **event,
        "job": {"namespace": declared.job.namespace, "name": declared.job.name, "facets": job_facets},
        "inputs": [Serde.to_dict(d) for d in declared.inputs],
        "outputs": [Serde.to_dict(d) for d in declared.outputs],
    }
