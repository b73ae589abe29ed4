"""Time from a Flink job started outside Dagster to its open run in Marquez: how long the lineage graph lags behind
who pressed the button.

Each round cancels the running supplier-stats job through Flink's REST API and starts it again from its retained
checkpoint with Flink's CLI (the command line the project submits with), then polls Marquez's REST API until the
job has exactly one RUNNING run carrying the new Flink job id. The stack's Dagster daemon runs the sensors (every
30 s), so the figure is dominated by where in the sensor's interval the start falls. Prints every round, the median,
min and max; failures are counted and printed, never timed.

Needs the stack up and the main job run (`scripts/run.sh`).

    .venv/bin/python benchmarks/outside_start.py --rounds 5
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import time
from urllib.parse import quote

import requests

from infra.services.flink import flink_cli, order_functions_jar
from infra.settings import REPO_ROOT, StackSettings

JOB = "supplier-stats"


def flink(settings: StackSettings, method: str, path: str, **kwargs) -> dict:
    resp = requests.request(method, f"{settings.flink_rest_url}{path}", timeout=30, **kwargs)
    resp.raise_for_status()
    return resp.json() if resp.content else {}


def running(settings: StackSettings) -> dict | None:
    jobs = flink(settings, "GET", "/jobs/overview")["jobs"]
    return next((j for j in jobs if j["name"] == JOB and j["state"] == "RUNNING"), None)


def open_run_for(settings: StackSettings, jid: str) -> bool:
    url = f"{settings.marquez_url}/api/v1/namespaces/{quote(settings.openlineage_namespace, safe='')}/jobs/{JOB}/runs"
    runs = [r for r in requests.get(url, params={"limit": 100}, timeout=10).json()["runs"] if r["state"] == "RUNNING"]
    return len(runs) == 1 and (runs[0].get("facets") or {}).get("flink_deployment", {}).get("jobId") == jid


def one_round(settings: StackSettings, timeout: float) -> float:
    job = running(settings)
    if job is None:
        raise RuntimeError(f"{JOB} does not run: run scripts/run.sh first")
    jid = job["jid"]
    user = flink(settings, "GET", f"/jobs/{jid}/config")["execution-config"]["user-config"]
    flink(settings, "PATCH", f"/jobs/{jid}", params={"mode": "cancel"})
    deadline = time.monotonic() + 120
    while flink(settings, "GET", f"/jobs/{jid}")["state"] != "CANCELED":
        if time.monotonic() > deadline:
            raise RuntimeError(f"{jid} not cancelled within 120 s")
        time.sleep(0.5)
    checkpoint = flink(settings, "GET", f"/jobs/{jid}/checkpoints")["latest"]["completed"]["external_path"]
    jobs_dir = REPO_ROOT / "flink_jobs"
    result = flink_cli(
        settings,
        "run",
        "-d",
        "-j",
        str(order_functions_jar(settings)),
        "-s",
        checkpoint,
        "-pyfs",
        f"{jobs_dir / 'connections.py'},{jobs_dir / 'deployment.py'}",
        "-py",
        str(jobs_dir / "supplier_stats_job.py"),
        *json.loads(base64.urlsafe_b64decode(user["lineage-lab.args"])),
        "--version",
        user["lineage-lab.version"],
    )
    marker = "Job has been submitted with JobID "
    if marker not in result.stdout:
        raise RuntimeError(f"flink run failed: {result.stdout[-1500:]}{result.stderr[-1500:]}")
    new = result.stdout.split(marker, 1)[1].split()[0]
    started = flink(settings, "GET", f"/jobs/{new}")["start-time"] / 1000  # Flink's own clock of the start
    deadline = time.monotonic() + timeout
    while not open_run_for(settings, new):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no single open run for {new} in Marquez within {timeout:.0f} s")
        time.sleep(0.5)
    return time.time() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--timeout", type=float, default=300.0, help="per round, for the open run")
    args = parser.parse_args()
    settings = StackSettings.from_env()
    seconds, failures = [], []
    for n in range(1, args.rounds + 1):
        try:
            took = one_round(settings, args.timeout)
        except (RuntimeError, requests.RequestException) as exc:
            failures.append(str(exc))
            print(f"round {n}: FAILED: {exc}")
            continue
        seconds.append(took)
        print(f"round {n}: open run in Marquez {took:.1f} s after Flink started the job")
    if seconds:
        print(
            f"outside start -> open Marquez run: median {statistics.median(seconds):.1f} s "
            f"(min {min(seconds):.1f}, max {max(seconds):.1f}) over {len(seconds)} rounds; {len(failures)} failed"
        )
    else:
        print(f"no round succeeded; {len(failures)} failed")
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
