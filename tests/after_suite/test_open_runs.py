"""After the whole suite: no job in Marquez has more than one open run. Run last, on its own (scripts/test.sh), so
that every test's deployments, cancellations, restarts and re-created connectors are behind it; read from
Marquez's REST API with plain HTTP."""

from __future__ import annotations

import time
from urllib.parse import quote

import pytest
import requests

pytestmark = pytest.mark.after_suite

#: the stack's sensors tick every 30 s: a job restarted by the last test gets its old run closed within two ticks
SETTLE = 120


def open_runs_per_job(marquez: str) -> dict[str, list[str]]:
    api = f"{marquez}/api/v1"
    found = {}
    for ns in requests.get(f"{api}/namespaces", params={"limit": 1000}, timeout=30).json()["namespaces"]:
        namespace = quote(ns["name"], safe="")
        jobs = requests.get(f"{api}/namespaces/{namespace}/jobs", params={"limit": 1000}, timeout=120).json()["jobs"]
        for job in jobs:
            url = f"{api}/namespaces/{namespace}/jobs/{quote(job['name'], safe='')}/runs"
            runs = requests.get(url, params={"limit": 1000}, timeout=30).json()["runs"]
            found[f"{ns['name']}/{job['name']}"] = [r["id"] for r in runs if r["state"] == "RUNNING"]
    return found


def test_no_job_has_more_than_one_running_run(settings):
    deadline = time.monotonic() + SETTLE
    while True:
        doubled = {job: runs for job, runs in open_runs_per_job(settings.marquez_url).items() if len(runs) > 1}
        if not doubled or time.monotonic() > deadline:
            break
        time.sleep(10)
    assert not doubled, f"jobs with more than one RUNNING run in Marquez: {doubled}"
