"""The Compose deployment's costs (issue 13): cold build time of the image, warm start time, memory per container.

- cold build: infra/compose/build-images.sh with Docker's layer cache off (``--no-cache``: every package and jar
  downloaded again; the base image is kept), once, because it takes minutes (``--cold``; left out by default);
- warm build: the same script with the cache on and nothing changed (what every later `up.sh` pays);
- warm start: with the image built, ``docker-compose up -d`` from no containers and no volumes until every service
  is healthy (a first start of the deployment), medians of ``--rounds``;
- restart: ``docker-compose stop`` then ``start`` with the volumes kept, until every service is healthy;
- memory: each container's memory (cgroup usage without page cache, as ``docker stats`` shows it) once the main
  job has run (``--with-pipeline``) or right after the last start.

    .venv/bin/python benchmarks/compose_deployment.py --rounds 3 --with-pipeline [--cold]

It tears the deployment down (volumes included) before each start round and leaves it up at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import time
from pathlib import Path

COMPOSE_DIR = Path(__file__).resolve().parent.parent / "infra" / "compose"


def sh(*argv: str, env: dict[str, str] | None = None, quiet: bool = True) -> str:
    result = subprocess.run(
        argv, cwd=COMPOSE_DIR, env={**os.environ, **(env or {})}, capture_output=quiet, text=True, check=False
    )
    if result.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({result.returncode}):\n{result.stdout}{result.stderr}")
    return result.stdout or ""


def timed(*argv: str, env: dict[str, str] | None = None) -> float:
    started = time.monotonic()
    sh(*argv, env=env)
    return time.monotonic() - started


def services() -> list[str]:
    return [s for s in sh("docker-compose", "config", "--services").split() if s != "pipeline"]


def wait_healthy(timeout: float = 900) -> float:
    started = time.monotonic()
    names = services()
    while time.monotonic() - started < timeout:
        states = []
        for name in names:
            cid = sh("docker-compose", "ps", "-q", name).strip()
            state = json.loads(sh("docker", "inspect", "-f", "{{json .State}}", cid)) if cid else {}
            states.append((state.get("Health") or {}).get("Status") or state.get("Status"))
        if all(s in ("healthy", "running") for s in states):
            return time.monotonic() - started
        time.sleep(2)
    raise SystemExit(f"not healthy within {timeout:.0f} s")


def memory() -> dict[str, float]:
    """MiB per container of the deployment."""
    out = sh("docker", "stats", "--no-stream", "--format", "{{.Name}}\t{{.MemUsage}}")
    units = {"B": 1 / 2**20, "KiB": 1 / 1024, "MiB": 1, "GiB": 1024}
    figures = {}
    for line in out.splitlines():
        name, usage = line.split("\t")
        if not name.startswith("lineage-lab"):
            continue
        value = usage.split("/")[0].strip()
        number = value.rstrip("KMGiB")
        figures[name] = float(number) * units[value[len(number) :]]
    return figures


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cold", action="store_true", help="also time a build without Docker's layer cache")
    p.add_argument("--with-pipeline", action="store_true", help="run the main job before measuring memory")
    args = p.parse_args()

    sh("bash", "ensure-docker.sh")
    if args.cold:
        cold = timed("bash", "build-images.sh", "--no-cache")
        print(f"cold build (no layer cache): {cold:.0f} s")
    warm_build = statistics.median(timed("bash", "build-images.sh") for _ in range(args.rounds))
    print(f"warm build (cache, nothing changed): median {warm_build:.1f} s of {args.rounds}")

    starts, restarts = [], []
    for i in range(args.rounds):
        sh("bash", "down.sh")
        sh("bash", "env-file.sh")
        started = time.monotonic()
        sh("docker-compose", "up", "-d")
        wait_healthy()
        starts.append(time.monotonic() - started)
        sh("docker-compose", "stop")
        started = time.monotonic()
        sh("docker-compose", "start")
        wait_healthy()
        restarts.append(time.monotonic() - started)
        print(f"round {i + 1}: first start {starts[-1]:.0f} s, restart {restarts[-1]:.0f} s", flush=True)
    print(f"warm start (image built, fresh volumes): median {statistics.median(starts):.0f} s")
    print(f"restart (volumes kept): median {statistics.median(restarts):.0f} s")

    if args.with_pipeline:
        sh("docker-compose", "run", "--rm", "pipeline", quiet=True)
    figures = memory()
    print(f"\n{'container':<44} {'memory MiB':>10}")
    for name, mib in sorted(figures.items(), key=lambda kv: -kv[1]):
        print(f"{name:<44} {mib:>10.0f}")
    print(f"{'total':<44} {sum(figures.values()):>10.0f}")


if __name__ == "__main__":
    main()
