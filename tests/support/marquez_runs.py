"""The stack's runs of a job as Marquez holds them, read with plain HTTP (no product client)."""

from __future__ import annotations

from urllib.parse import quote

import requests

NAMESPACE = "lineage-lab"  # the stack's own job namespace


def marquez_runs(settings, job: str) -> list[dict]:
    url = f"{settings.marquez_url}/api/v1/namespaces/{NAMESPACE}/jobs/{quote(job, safe='')}/runs"
    return requests.get(url, params={"limit": 200}, timeout=10).json().get("runs", [])


def running_runs(settings, job: str) -> list[dict]:
    return [r for r in marquez_runs(settings, job) if r["state"] == "RUNNING"]


def one_open_run_with(settings, job: str, facet: str, field: str, value: str) -> dict | None:
    """The single RUNNING run of ``job`` in Marquez when it carries ``value`` in its run facet, else None."""
    runs = running_runs(settings, job)
    if len(runs) == 1 and ((runs[0].get("facets") or {}).get(facet) or {}).get(field) == value:
        return runs[0]
    return None
