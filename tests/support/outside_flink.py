"""What an operator does to the stack's Flink cluster outside Dagster, through Flink's own interfaces (its REST API
and CLI), read without the product: the running job of a name, a cancel, the arguments a job carries, a restart
from a savepoint or checkpoint with the command line the project submits with."""

from __future__ import annotations

import base64
import json

import requests

from infra.services.flink import flink_cli, order_functions_jar
from infra.settings import REPO_ROOT
from tests.support.engine_waits import wait_for


def flink(settings, method: str, path: str, **kwargs) -> dict:
    resp = requests.request(method, f"{settings.flink_rest_url}{path}", timeout=30, **kwargs)
    resp.raise_for_status()
    return resp.json() if resp.content else {}


def running_jid(settings, name: str) -> str | None:
    jobs = flink(settings, "GET", "/jobs/overview")["jobs"]
    return next((j["jid"] for j in jobs if j["name"] == name and j["state"] == "RUNNING"), None)


def cancel(settings, jid: str) -> None:
    flink(settings, "PATCH", f"/jobs/{jid}", params={"mode": "cancel"})
    wait_for(f"{jid} cancelled", lambda: flink(settings, "GET", f"/jobs/{jid}")["state"] == "CANCELED")


def job_args(settings, jid: str) -> list[str]:
    """The program arguments a pipeline job records in its own configuration (read here without the product)."""
    user = flink(settings, "GET", f"/jobs/{jid}/config")["execution-config"]["user-config"]
    return json.loads(base64.urlsafe_b64decode(user["lineage-lab.args"]))


def restart_with_flink_cli(settings, stopped: str, state: str, args: list[str] | None = None) -> str:
    """Start supplier-stats again from ``state`` as an operator would: the command line the project submits with
    (Flink's CLI), with the arguments (unless ``args`` are given) and version the stopped job carried; returns the
    new Flink job id."""
    user = flink(settings, "GET", f"/jobs/{stopped}/config")["execution-config"]["user-config"]
    jobs_dir = REPO_ROOT / "flink_jobs"
    result = flink_cli(
        settings,
        "run",
        "-d",
        "-j",
        str(order_functions_jar(settings)),
        "-s",
        state,
        "-pyfs",
        f"{jobs_dir / 'connections.py'},{jobs_dir / 'deployment.py'}",
        "-py",
        str(jobs_dir / "supplier_stats_job.py"),
        *(job_args(settings, stopped) if args is None else args),
        "--version",
        user["lineage-lab.version"],
    )
    assert "Job has been submitted with JobID" in result.stdout, result.stdout[-2000:] + result.stderr[-2000:]
    return result.stdout.split("Job has been submitted with JobID ", 1)[1].split()[0]
