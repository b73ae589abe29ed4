"""A consistent cut of supplier-stats' hop: the source group's committed offsets C, the output's and the dead
letters' ends, C again, with the job's newest checkpoint read around them (Flink's REST API). Taken again while
anything moved, and after a wait while a checkpoint completed less than ``SETTLE_MS`` ago (its commits may be on
their way)."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

import requests

from lineage_assets.conservation.balance import StoreUnavailable
from lineage_assets.conservation.hops import Hop
from lineage_assets.conservation.stores import Stores

#: the window operator, as Flink's REST API names its vertex
WINDOW_VERTEX = "per-supplier windows"
#: a checkpoint completed this recently may not have committed its offsets and transactions yet: wait
SETTLE_MS = 2_000
_CUT_ATTEMPTS = 6
_LONG_MIN = -(2**63)


@dataclass(frozen=True)
class Checkpoint:
    id: int
    trigger_ms: int
    ack_ms: int


class FlinkView:
    """What the reader needs of the running job over REST: its newest completed checkpoint and the window
    operator's input watermark."""

    def __init__(self, stores: Stores, job_name: str) -> None:
        self.client = stores.flink
        self.url = self.client.url
        self.job_name = job_name

    def _get(self, path: str) -> Any:
        try:
            resp = requests.get(f"{self.url}{path}", timeout=self.client.timeout)
        except requests.RequestException as exc:
            raise self._unavailable(exc) from exc
        if resp.status_code >= 400:
            raise self._unavailable(f"GET {path}: HTTP {resp.status_code}")
        return resp.json()

    def _unavailable(self, exc: Any) -> StoreUnavailable:
        return StoreUnavailable(
            f"Flink's REST API at {self.url} did not answer ({exc}); start Flink (`lineage-lab stack up flink`) or "
            "point LINEAGE_LAB_EXTERNAL_FLINK at the cluster, then reconcile again"
        )

    def running_job(self) -> str | None:
        try:
            job = self.client.active(self.job_name)
        except Exception as exc:
            raise self._unavailable(exc) from exc
        return job.jid if job is not None and job.state == "RUNNING" else None

    def checkpoint(self, jid: str) -> Checkpoint | None:
        latest = ((self._get(f"/jobs/{jid}/checkpoints").get("latest") or {}).get("completed")) or None
        if not latest:
            return None
        return Checkpoint(int(latest["id"]), int(latest["trigger_timestamp"]), int(latest["latest_ack_timestamp"]))

    def watermark(self, jid: str) -> int | None:
        """The window operator's input watermark (lowest of its subtasks); None when it has none yet."""
        vertices = self._get(f"/jobs/{jid}").get("vertices", [])
        vertex = next((v for v in vertices if v["name"].startswith(WINDOW_VERTEX)), None)
        if vertex is None:
            return None
        marks = [int(m["value"]) for m in self._get(f"/jobs/{jid}/vertices/{vertex['id']}/watermarks")]
        if not marks or min(marks) <= _LONG_MIN + 1:
            return None
        return min(marks)


@dataclass(frozen=True)
class Cut:
    committed: dict[int, int]  # orders partition -> C (log start when the group has none)
    output_end: dict[int, tuple[int, int]]
    dlq_end: dict[int, tuple[int, int]]
    checkpoint: Checkpoint | None
    steady: bool


def now_ms() -> int:
    return int(time.time() * 1000)


def cut_key(cut: Cut) -> str:
    """What a cut saw, to tell next time whether anything moved since (JSON)."""
    return json.dumps(
        {
            "orders": {str(p): c for p, c in cut.committed.items()},
            "output": {str(p): end for p, (_, end) in cut.output_end.items()},
            "dead_letters": {str(p): end for p, (_, end) in cut.dlq_end.items()},
        },
        sort_keys=True,
    )


def take_cut(
    hop: Hop, stores: Stores, flink: FlinkView, jid: str | None, group: str, sleep=time.sleep, quiet: str | None = None
) -> Cut:
    """C, the output's end, the DLQ's end, C again (and the newest checkpoint around them); taken again while
    anything moved or a checkpoint has just completed (its commits may still be on their way). ``group``: the job's
    source consumer group (``Stores.consumer_group``), which commits its offsets on each checkpoint. ``quiet``: the
    ``cut_key`` of an earlier settled cut that left nothing pending; a cut that sees exactly it again needs no
    settling (no commit of the new checkpoint is visible: it sees the same records as that cut, which balanced)."""
    topic = hop.input.name
    partitions = sorted(stores.kafka.offsets(topic))
    cut = None
    for _ in range(_CUT_ATTEMPTS):
        before = flink.checkpoint(jid) if jid else None
        settling = before is not None and now_ms() - before.ack_ms < SETTLE_MS
        if settling and quiet is None:
            sleep((SETTLE_MS - (now_ms() - before.ack_ms)) / 1000)
            continue
        c1 = stores.kafka.committed(topic, group, partitions)
        out = stores.kafka.offsets(hop.output.name)
        dlq = stores.kafka.offsets(hop.dead_letters.name) if hop.dead_letters else {}
        c2 = stores.kafka.committed(topic, group, partitions)
        after = flink.checkpoint(jid) if jid else None
        steady = c1 == c2 and before == after
        found = Cut({p: max(o, 0) for p, o in c2.items()}, out, dlq, after, steady)
        if settling and not (steady and cut_key(found) == quiet):
            sleep(max(SETTLE_MS - (now_ms() - before.ack_ms), 0) / 1000)
            continue
        cut = found
        if steady:
            return cut
        sleep(0.5)
    if cut is None:  # every attempt waited for a checkpoint to settle: take one anyway
        c = stores.kafka.committed(topic, group, partitions)
        cut = Cut(
            {p: max(o, 0) for p, o in c.items()},
            stores.kafka.offsets(hop.output.name),
            stores.kafka.offsets(hop.dead_letters.name) if hop.dead_letters else {},
            flink.checkpoint(jid) if jid else None,
            False,
        )
    return cut


def wait_for_checkpoint_after(flink: FlinkView, jid: str, t_ms: int, sleep, timeout_s: float = 30.0) -> None:
    """Until a checkpoint triggered after ``t_ms`` has completed (and settled), at most ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        ck = flink.checkpoint(jid)
        if ck is not None and ck.trigger_ms > t_ms and now_ms() - ck.ack_ms >= SETTLE_MS:
            return
        sleep(0.5)
