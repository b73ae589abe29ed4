"""One deployer of a Flink job at a time. Deploying is "does it run? no: submit it", and a PyFlink submission takes
seconds; two deployers inside that window (`stack up` resuming the job while a Dagster run materializes it, two runs
of the asset) would both find nothing running and both start it from the same state, so every record would be
written twice. On this host a lock per job name spans the look and the submit; across hosts, a deployer whose job
was not the first of its name to start cancels its own (``submit`` in ``deploy``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from infra.file_lock import held
from lineage_assets.flink.client import FlinkClient, FlinkError

#: how long a deployer waits for another one of the same job: a submission's own limit (the CLI's 300 s) and more
WAIT_S = 330.0


@contextmanager
def one_deployer(client: FlinkClient, name: str, wait_s: float = WAIT_S) -> Iterator[None]:
    """Held from the look at the cluster until the submitted job is listed by it."""
    path = client.settings.data_dir / "flink" / "deploying" / f"{name}.lock"
    with held(path, wait_s, lambda: FlinkError(_busy(name, path, wait_s))):
        yield


def _busy(name: str, path, wait_s: float) -> str:
    return (
        f"another deployment of Flink job {name} on this host has held {path} for over {wait_s:.0f} s; look for a "
        "hung `lineage-lab stack up` or Dagster run deploying it, stop it, then deploy again"
    )
