"""A Flink job's restorable state: the newest savepoint or retained checkpoint of a job name, from what the engine
keeps. The cluster's REST API knows the jobs it ran since it started (each one's latest savepoint and completed
checkpoint); the stack's own cluster also keeps them on disk, one folder per job name (the jobs retain their
checkpoints on cancellation and failure, and this project's savepoints go to the job name's folder), so they are
found after the cluster restarted and forgot its jobs."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from flink_jobs import deployment
from lineage_assets.flink.client import ACTIVE, FlinkClient

#: program arguments that name what a job reads and writes: state taken with other values belongs to other data
IDENTITY_ARGS = ("--bootstrap", "--source-topic", "--sink-topic", "--table", "--group-id")


@dataclass(frozen=True)
class RestorableState:
    path: str
    taken_ms: int
    #: in words, for logs and metadata: "savepoint of job <jid>", "retained checkpoint on disk" ...
    source: str
    #: the program arguments of the job that wrote it, when the cluster still knows that job
    args: tuple[str, ...] | None = None


def local_path(url: str) -> Path | None:
    """The filesystem path of a ``file:`` URL (None for object stores and other schemes)."""
    parts = urlsplit(url)
    return Path(parts.path) if parts.scheme in ("file", "") else None


def exists(url: str) -> bool:
    path = local_path(url)
    return path is None or (path / "_metadata").exists() or (path.exists() and path.is_file())


def _on_disk(folder: str, kind: str) -> list[RestorableState]:
    base = local_path(folder) if folder else None
    if base is None or not base.is_dir():
        return []
    pattern = "savepoint-*/_metadata" if kind == "savepoint" else "*/chk-*/_metadata"
    return [
        RestorableState(f"file://{meta.parent}", int(meta.stat().st_mtime * 1000), f"{kind} on disk")
        for meta in base.glob(pattern)
    ]


def newest_state(client: FlinkClient, name: str) -> RestorableState | None:
    """The newest savepoint or retained checkpoint of job ``name`` that still exists, or None."""
    found: list[RestorableState] = []
    for job in client.named(name):
        if job.state in ACTIVE:
            continue
        latest = client.latest_state(job.jid)
        if latest and exists(latest[0]):
            args = deployment.decode_args(client.user_config(job.jid).get(deployment.ARGS, ""))
            kind = "savepoint" if "savepoint" in latest[0] else "retained checkpoint"
            source = f"{kind} of job {job.jid} ({job.state.lower()})"
            found.append(RestorableState(latest[0], latest[1], source, tuple(args) if args is not None else None))
    found += _on_disk(client.savepoint_dir(name), "savepoint")
    found += _on_disk(client.checkpoint_dir(name), "retained checkpoint")
    return max(found, key=lambda s: s.taken_ms) if found else None


def identity_of(args: list[str] | tuple[str, ...]) -> dict[str, str]:
    """The values of IDENTITY_ARGS in a program's arguments."""
    out = {}
    for i, arg in enumerate(args[:-1]):
        if arg in IDENTITY_ARGS:
            out[arg] = args[i + 1]
    return out


def mismatch(state: RestorableState, args: list[str]) -> str | None:
    """Why ``state`` belongs to other data than a job started with ``args`` (None: it fits, or nothing says)."""
    if state.args is None:
        return None
    theirs, mine = identity_of(state.args), identity_of(args)
    differ = [
        f"{k} {theirs.get(k)!r} there, {mine.get(k)!r} now" for k in IDENTITY_ARGS if theirs.get(k) != mine.get(k)
    ]
    return "; ".join(differ) or None
